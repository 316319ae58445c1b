"""The bucket of `--store s3` and `--capacity`: moto's S3 server on loopback with datasets
uploaded, behind `delay-proxy`, which delays every request and counts requests and bytes."""

import os
import socket
import subprocess
import sys
import time

BUCKET = "peers"
ACCESS_KEY = "AKIAPEERSBENCH"
SECRET_KEY = "peers-bench-secret"
REGION = "us-east-1"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_status(port, method, path):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, headers={"Content-Length": "0"})
        return conn.getresponse().status
    finally:
        conn.close()


class Bucket:
    """moto's S3 server on loopback with the datasets uploaded, and `delay-proxy` in front of
    it: every tool reads through the proxy, so every request waits the same latency, and the
    proxy's counters give each run's requests and bytes."""

    def __init__(self, proxy_binary, latency_ms, datasets):
        self.moto_port = free_port()
        self.moto = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.moto_port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.proxy = None
        deadline = time.time() + 60
        while True:
            try:
                http_status(self.moto_port, "GET", "/")
                break
            except OSError:
                if time.time() > deadline or self.moto.poll() is not None:
                    self.stop()
                    raise RuntimeError("moto's server did not start")
                time.sleep(0.1)
        if http_status(self.moto_port, "PUT", f"/{BUCKET}") != 200:
            self.stop()
            raise RuntimeError("could not create the bucket")
        started = time.perf_counter()
        total = 0
        for root in datasets:
            total += upload(f"http://127.0.0.1:{self.moto_port}", root, os.path.basename(root))
        print(f"Uploaded {total / 1e6:.0f} MB to s3://{BUCKET}/ (moto on 127.0.0.1:{self.moto_port}) "
              f"in {time.perf_counter() - started:.0f} s")
        # The first query measured after the upload took twice its CPU and more than twice its
        # time, whichever it was (q1, or q1s when run first), while the kernel wrote moto's
        # temporary files back and huge pages were hard to find: write back and compact now.
        os.sync()
        try:
            with open("/proc/sys/vm/compact_memory", "w") as compact:
                compact.write("1")
        except OSError:
            pass
        self.proxy = subprocess.Popen([proxy_binary, "--upstream", f"127.0.0.1:{self.moto_port}",
                                       "--delay-ms", str(latency_ms)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.endpoint = self.proxy.stdout.readline().strip()
        if not self.endpoint.startswith("http://"):
            self.stop()
            raise RuntimeError("delay-proxy did not start")
        self.env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                        AWS_REGION=REGION, AWS_ENDPOINT_URL=self.endpoint, AWS_ALLOW_HTTP="true",
                        AWS_EC2_METADATA_DISABLED="true")

    def counters(self):
        """The proxy's requests, bytes served and connections so far."""
        self.proxy.stdin.write("\n")
        self.proxy.stdin.flush()
        line = self.proxy.stdout.readline()
        return {k: int(v) for k, v in (part.split("=") for part in line.split())}

    def url(self, root):
        return f"s3://{BUCKET}/{os.path.basename(root)}"

    def stop(self):
        if self.proxy is not None:
            self.proxy.stdin.close()
            self.proxy.wait(timeout=30)
        self.moto.terminate()
        self.moto.wait(timeout=60)


def upload(endpoint, root, prefix):
    """Uploads every file below `root` to the bucket at `prefix/` with boto3 (in a child process,
    so that this one stays small): bytes uploaded."""
    script = """
import os, sys, boto3
from boto3.s3.transfer import TransferConfig
endpoint, root, bucket, prefix = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
config = TransferConfig(multipart_threshold=1 << 40)  # one PUT per file
total = 0
for folder, _, names in os.walk(root):
    for name in names:
        path = os.path.join(folder, name)
        s3.upload_file(path, bucket, prefix + "/" + os.path.relpath(path, root), Config=config)
        total += os.path.getsize(path)
print(total)
"""
    result = subprocess.run([sys.executable, "-c", script, endpoint, root, BUCKET, prefix],
                            check=True, capture_output=True, text=True)
    return int(result.stdout.split()[-1])
