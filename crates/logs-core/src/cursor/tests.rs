use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, NaiveDate, Utc};
use object_store::ObjectMeta;

use super::*;

const SETTLE: Duration = Duration::from_secs(60);

fn day(d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(2026, 11, d).unwrap()
}

/// 2026-11-28 12:00:00 UTC plus `seconds`.
fn at(seconds: i64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs((1_795_867_200 + seconds) as u64)
}

fn object(date: u32, name: &str, modified: SystemTime, size: u64) -> (NaiveDate, Listed) {
    let location = format!("application_id=1/date={}/{name}", day(date));
    let meta = ObjectMeta {
        location: object_store::path::Path::from(location.as_str()),
        last_modified: DateTime::<Utc>::from(modified),
        size,
        e_tag: Some(format!("{size}")),
        version: None,
    };
    (day(date), Listed { file_name: name.to_owned(), name: Arc::from(location.as_str()), meta })
}

fn settings(keys: &CursorKeys) -> CursorSettings {
    CursorSettings { keys: keys.clone(), settle: SETTLE, max_lateness_days: 10 }
}

/// One call of a chain of application 1 at `now`, from `cursor` ("start" or a cursor's text).
fn call(
    cursor: &str,
    keys: &CursorKeys,
    now: SystemTime,
    listed: Vec<(NaiveDate, Listed)>,
) -> Result<(Vec<String>, String, StepSummary), Error> {
    let chain_cursor = match cursor {
        "start" => ChainCursor::Start,
        text => ChainCursor::Continue { position: open(text, keys).unwrap(), text: text.to_owned() },
    };
    let settings = settings(keys);
    let call = Call {
        cursor: &chain_cursor,
        application_id: 1,
        dimension: DateDimension::Default,
        since: 0,
        binding: Binding::of(&["error_id"], Vec::new()),
        settings: &settings,
        now,
    };
    let step = step(call, listed)?;
    let names = step.deliver.iter().map(|(_, o)| o.file_name.clone()).collect();
    Ok((names, step.next, step.summary))
}

#[test]
fn a_chain_delivers_each_settled_object_once_late_ones_included() {
    let keys = CursorKeys::generated();
    let a = object(20, "a.parquet", at(-600), 10);
    let b = object(27, "b.parquet", at(-30), 10);
    let (first, cursor, summary) = call("start", &keys, at(0), vec![a.clone(), b.clone()]).unwrap();
    // b is younger than the settle time: it waits.
    assert_eq!(first, ["a.parquet"]);
    assert_eq!(summary, StepSummary { new_objects: 1, delivered_before: 0, settling: 1 });

    // A late arrival in an old folder, written after the first call.
    let late = object(21, "late.parquet", at(100), 10);
    let listed = vec![a.clone(), late.clone(), b.clone()];
    let (second, cursor, _) = call(&cursor, &keys, at(200), listed.clone()).unwrap();
    assert_eq!(second, ["late.parquet", "b.parquet"]);
    let (third, _, summary) = call(&cursor, &keys, at(300), listed).unwrap();
    assert!(third.is_empty());
    assert_eq!(summary, StepSummary { new_objects: 0, delivered_before: 3, settling: 0 });
}

#[test]
fn an_object_deleted_replaced_or_appearing_behind_the_horizon_is_a_conflict_naming_its_folder() {
    let keys = CursorKeys::generated();
    let a = object(20, "a.parquet", at(-600), 10);
    let b = object(20, "b.parquet", at(-500), 10);
    let (_, cursor, _) = call("start", &keys, at(0), vec![a.clone(), b.clone()]).unwrap();

    let conflict = |listed| match call(&cursor, &keys, at(100), listed) {
        Err(Error::CursorConflict { date, restart, what }) => {
            assert_eq!((date, restart), (day(20), day(20)));
            what
        }
        other => panic!("expected a conflict, got {other:?}"),
    };
    assert!(
        conflict(vec![a.clone()]).contains("objects the chain delivered are gone (1 deleted or replaced")
    );
    let replaced = object(20, "b.parquet", at(-500), 11);
    assert!(conflict(vec![a.clone(), replaced]).contains("was replaced"));
    let behind = object(20, "c.parquet", at(-400), 10);
    assert!(
        conflict(vec![a.clone(), b.clone(), behind]).contains(
            "objects appeared in it with a modification time the chain had already passed (1 written"
        )
    );
    // Rewritten with a new time, it is gone from behind the horizon.
    let rewritten = object(20, "b.parquet", at(50), 10);
    assert!(conflict(vec![a.clone(), rewritten]).contains("are gone"));
    // Unchanged, the chain goes on.
    assert!(call(&cursor, &keys, at(100), vec![a, b]).is_ok());
}

#[test]
fn folders_older_than_the_window_are_no_longer_checked() {
    let keys = CursorKeys::generated();
    let old = object(1, "old.parquet", at(-600), 10);
    let recent = object(27, "recent.parquet", at(-600), 10);
    let (delivered, cursor, _) = call("start", &keys, at(0), vec![old, recent.clone()]).unwrap();
    assert_eq!(delivered.len(), 2);
    // Retention deleted the folder of the 1st, 27 days before: outside a 10-day window.
    let position = open(&cursor, &keys).unwrap();
    assert_eq!(position.window_start, day(18));
    assert_eq!(position.dates.len(), 1);
    assert!(call(&cursor, &keys, at(100), vec![recent]).is_ok());
    // A continuing call lists from the window's first date only.
    let continuing = ChainCursor::Continue { position, text: cursor };
    let settings = settings(&keys);
    assert_eq!(first_listed(&continuing, &settings, at(100)), Some(day(18)));
    assert_eq!(first_listed(&ChainCursor::Start, &settings, at(100)), None);
    let wider = CursorSettings { max_lateness_days: 20, ..settings };
    assert_eq!(first_listed(&continuing, &wider, at(100)), Some(day(8)));
}

#[test]
fn the_horizon_never_moves_back_when_a_call_is_answered_by_a_clock_behind() {
    let keys = CursorKeys::generated();
    let a = object(27, "a.parquet", at(-600), 10);
    let (_, cursor, _) = call("start", &keys, at(0), vec![a.clone()]).unwrap();
    // A replica whose clock is 10 minutes behind: nothing is delivered twice.
    let (again, cursor, _) = call(&cursor, &keys, at(-600), vec![a.clone()]).unwrap();
    assert!(again.is_empty());
    assert_eq!(open(&cursor, &keys).unwrap().horizon, nanos(at(0)) - SETTLE.as_nanos() as i64);
}

#[test]
fn a_cursor_is_refused_when_any_byte_changes_or_its_key_is_gone() {
    let keys = CursorKeys::generated();
    let (_, cursor, _) = call("start", &keys, at(0), vec![object(27, "a.parquet", at(-600), 10)]).unwrap();
    assert!(open(&cursor, &keys).is_ok());
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, &cursor).unwrap();
    for i in 0..bytes.len() {
        let mut changed = bytes.clone();
        changed[i] ^= 0x01;
        let text = base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, &changed);
        let error = open(&text, &keys).unwrap_err();
        assert_eq!(error.parameter(), "cursor");
    }
    for cut in [0, 1, cursor.len() / 2, cursor.len() - 1] {
        assert!(open(&cursor[..cut], &keys).is_err(), "cut at {cut}");
    }
    assert!(open(&"A".repeat(token::MAX_TEXT + 1), &keys).is_err());
    let other = CursorKeys::generated();
    assert!(open(&cursor, &other).unwrap_err().message().contains("no longer holds"));
}

#[test]
fn keys_rotate_the_first_signs_and_every_one_is_accepted() {
    let old = "0123456789abcdef0123456789abcdef-old";
    let new = "0123456789abcdef0123456789abcdef-new";
    let before = CursorKeys::from_text(&format!("# the chain keys\n{old}\n")).unwrap();
    let during = CursorKeys::from_text(&format!("{new}\n\n{old}\n")).unwrap();
    let after = CursorKeys::from_text(new).unwrap();
    let listed = || vec![object(27, "a.parquet", at(-600), 10)];
    let (_, signed_old, _) = call("start", &before, at(0), listed()).unwrap();
    let (_, signed_new, _) = call(&signed_old, &during, at(10), listed()).unwrap();
    assert!(open(&signed_old, &after).is_err());
    assert!(open(&signed_new, &after).is_ok());
    assert_eq!(before.len(), 1);
    assert_eq!(during.len(), 2);
}

#[test]
fn key_files_are_checked_without_echoing_a_key() {
    let short = CursorKeys::from_text("# comment\ntoo-short-a-key\n").unwrap_err();
    assert!(short.contains("line 2") && !short.contains("too-short"), "{short}");
    assert!(CursorKeys::from_text("\n# only a comment\n").unwrap_err().contains("holds no key"));
    let keys = CursorKeys::from_text(&"k".repeat(40)).unwrap();
    assert!(!format!("{keys:?}").contains("kkkk"));
}

#[test]
fn a_cursor_checks_the_newest_183_folders_and_stays_short() {
    let keys = CursorKeys::generated();
    let first = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap();
    let listed: Vec<(NaiveDate, Listed)> = (0..300)
        .map(|i| {
            let (_, mut object) = object(1, &format!("{i}.parquet"), at(-600), 10);
            let date = first + chrono::TimeDelta::days(i);
            object.meta.location =
                object_store::path::Path::from(format!("application_id=1/date={date}/x.parquet"));
            (date, object)
        })
        .collect();
    let settings = CursorSettings { keys: keys.clone(), settle: SETTLE, max_lateness_days: u16::MAX };
    let chain_cursor = ChainCursor::Start;
    fn call<'a>(cursor: &'a ChainCursor, settings: &'a CursorSettings) -> Call<'a> {
        Call {
            cursor,
            application_id: 1,
            dimension: DateDimension::Default,
            since: 0,
            binding: Binding::of(&["error_id"], Vec::new()),
            settings,
            now: at(0),
        }
    }
    let step_one = step(call(&chain_cursor, &settings), listed.clone()).unwrap();
    assert_eq!(step_one.deliver.len(), 300);
    let position = open(&step_one.next, &keys).unwrap();
    assert_eq!(position.dates.len(), 183);
    assert_eq!(position.window_start, first + chrono::TimeDelta::days(300 - 183));
    assert!(step_one.next.len() < 4_000, "{} characters", step_one.next.len());
    let continuing = ChainCursor::Continue { position, text: step_one.next };
    let step_two = step(call(&continuing, &settings), listed).unwrap();
    assert!(step_two.deliver.is_empty());
}

#[test]
fn a_folder_that_leaves_the_window_overnight_is_not_missed_by_the_check() {
    let keys = CursorKeys::generated();
    // The window of 10 days starts on the 18th today, on the 20th two days later.
    let leaving = object(18, "leaving.parquet", at(-600), 10);
    let staying = object(25, "staying.parquet", at(-600), 10);
    let (_, cursor, _) = call("start", &keys, at(0), vec![leaving, staying.clone()]).unwrap();
    assert_eq!(open(&cursor, &keys).unwrap().dates.len(), 2);
    // Two days later the 18th is no longer listed: no conflict for what was not looked at.
    let two_days = 2 * 86_400;
    let late = object(26, "late.parquet", at(two_days - 100), 10);
    let (delivered, cursor, _) = call(&cursor, &keys, at(two_days), vec![staying, late]).unwrap();
    assert_eq!(delivered, ["late.parquet"]);
    let position = open(&cursor, &keys).unwrap();
    assert_eq!((position.window_start, position.dates.len()), (day(20), 2));
}
