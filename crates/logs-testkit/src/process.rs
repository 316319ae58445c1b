//! Child processes run to their end within a bound, so that a hang fails the test instead of
//! stopping the run.

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `command` with its stdout and stderr captured, to its end; killed, and the test
/// failed, after `limit`.
pub fn run_bounded(command: &mut Command, limit: Duration) -> Output {
    let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    finish(child, limit)
}

/// Waits for `child` to end and collects what it wrote to its piped stdout and stderr (empty
/// where not piped); kills it, and fails the test, after `limit`. The pipes are read on
/// threads, so that a chatty child cannot block on a full pipe.
pub fn finish(mut child: Child, limit: Duration) -> Output {
    let pipe = |mut reader: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            reader.read_to_end(&mut buf).ok();
            buf
        })
    };
    let stdout = child.stdout.take().map(|s| pipe(Box::new(s)));
    let stderr = child.stderr.take().map(|s| pipe(Box::new(s)));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().ok();
            child.wait().ok();
            panic!("the child process neither ended nor failed within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let collect =
        |t: Option<std::thread::JoinHandle<Vec<u8>>>| t.map(|t| t.join().unwrap()).unwrap_or_default();
    Output { status, stdout: collect(stdout), stderr: collect(stderr) }
}
