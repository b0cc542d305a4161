#!/usr/bin/env python3
"""A small hub server for swift-download's tests and benchmark (standard library only).

It serves a directory tree as both a Hugging Face hub and a ModelScope hub:

  ROOT/<org>/<name>/...            files of model repository org/name
  ROOT/datasets/<org>/<name>/...   files of dataset repository org/name

Hugging Face
  GET  /api/{models|datasets}/{id}/revision/{rev}[?blobs=true]  {"sha", "siblings": [...]}
  GET  /api/{models|datasets}/{id}/tree/{rev}[?recursive=true]  [{"type","path","size","oid","lfs"}]
  HEAD|GET /{id}/resolve/{rev}/{path}, /datasets/{id}/resolve/{rev}/{path}
       small files: 200 with ETag = git blob sha1, X-Repo-Commit
       LFS files (*.safetensors, *.bin, or > 64 KiB): 302 to /_lfs/... on this server with
       X-Repo-Commit, X-Linked-Etag (sha256), X-Linked-Size, as huggingface.co does
ModelScope
  GET  /api/v1/{models|datasets}/{id}/repo/files?Revision=&Recursive=   {"Code":200,"Data":{"Files"}}
  GET  /api/v1/{models|datasets}/{id}/repo?Revision=&FilePath=          the file
Every file answer honours "Range: bytes=N-[M]" (206, or 416 past the end).

Faults: --faults FILE holds a JSON list of rules, re-read when the file changes:
  {"match": GLOB, "kind": K, "times": N, ...}   GLOB is matched against the file path, or
                                                "@listing" for listing requests; times: how
                                                many requests it hits (default: all)
  kinds: "drop" (send "after" bytes of the body, then close), "503" (with "retry_after"
  seconds), "corrupt" (flip one byte of the body), "slow" (sleep "delay" seconds before the
  answer), "401", "404"
--tls-cert/--tls-key serve https instead of http.
--token T answers 401 to any request without "Authorization: Bearer T".
--log FILE appends one JSON line per request: method, path, file, range_start, status, sent.
The chosen port is written to --port-file once the socket listens (bound to 127.0.0.1).
"""
import argparse
import fnmatch
import hashlib
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
FAULTS = {"mtime": None, "rules": [], "used": []}
HASHES = {}


def commit_of(repo):
    return hashlib.sha1(("commit:" + repo).encode()).hexdigest()


def file_hashes(path):
    st = os.stat(path)
    key = (path, st.st_size, st.st_mtime_ns)
    with LOCK:
        if key in HASHES:
            return HASHES[key]
    s256 = hashlib.sha256()
    s1 = hashlib.sha1(b"blob %d\0" % st.st_size)
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            s256.update(b)
            s1.update(b)
    r = (s256.hexdigest(), s1.hexdigest(), st.st_size)
    with LOCK:
        HASHES[key] = r
    return r


def is_lfs(rel, size):
    return rel.endswith((".safetensors", ".bin", ".gguf")) or size > 65536


def list_files(repo_dir):
    out = []
    for d, dirs, files in os.walk(repo_dir):
        dirs.sort()
        for f in sorted(files):
            full = os.path.join(d, f)
            out.append((os.path.relpath(full, repo_dir).replace(os.sep, "/"), full))
    return out


def fault_for(name):
    """The first fault rule matching name that has uses left (and consume one use)."""
    if not ARGS.faults:
        return None
    with LOCK:
        try:
            mt = os.stat(ARGS.faults).st_mtime_ns
        except OSError:
            return None
        if mt != FAULTS["mtime"]:
            with open(ARGS.faults) as f:
                FAULTS["rules"] = json.load(f)
            FAULTS["used"] = [0] * len(FAULTS["rules"])
            FAULTS["mtime"] = mt
        for i, r in enumerate(FAULTS["rules"]):
            if not fnmatch.fnmatchcase(name, r.get("match", "*")):
                continue
            times = r.get("times")
            if times is not None and FAULTS["used"][i] >= times:
                continue
            FAULTS["used"][i] += 1
            return r
    return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hubserver/1"

    def setup(self):
        super().setup()
        # headers and body go out in separate writes: without this, Nagle's algorithm and the
        # client's delayed ACK add 40 ms to every small file
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *a):
        pass

    def log(self, **kw):
        if not ARGS.log:
            return
        kw.setdefault("method", self.command)
        kw.setdefault("path", self.path)
        line = json.dumps(kw) + "\n"
        with LOCK:
            with open(ARGS.log, "a") as f:
                f.write(line)

    def send_json(self, code, obj, extra=None):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.log(status=code, sent=len(body))

    def not_found(self, what="Repository not found"):
        self.send_json(404, {"error": what, "Code": 10010205001, "Message": what, "Success": False})

    def auth_ok(self):
        if not ARGS.token:
            return True
        if self.headers.get("Authorization") == "Bearer " + ARGS.token:
            return True
        self.send_json(401, {"error": "Invalid credentials", "Code": 401,
                             "Message": "Unauthorized", "Success": False})
        return False

    def do_HEAD(self):
        self.handle_any()

    def do_GET(self):
        self.handle_any()

    def repo_dir(self, kind, repo):
        base = ARGS.root if kind == "models" else os.path.join(ARGS.root, "datasets")
        d = os.path.join(base, repo)
        if ".." in repo.split("/") or not os.path.isdir(d):
            return None
        return d

    def rev_ok(self, repo, rev):
        return rev in ("main", "master", commit_of(repo))

    def general_fault(self, name):
        r = fault_for(name)
        if not r:
            return None
        k = r.get("kind")
        if k == "slow":
            time.sleep(float(r.get("delay", 1)))
            return None
        if k == "503":
            extra = {}
            if "retry_after" in r:
                extra["Retry-After"] = str(r["retry_after"])
            self.send_json(503, {"error": "Service Unavailable"}, extra)
            return "done"
        if k == "401":
            self.send_json(401, {"error": "Invalid credentials"})
            return "done"
        if k == "404":
            self.not_found("Entry not found")
            return "done"
        return r

    def handle_any(self):
        if not self.auth_ok():
            return
        u = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(u.query)
        parts = [urllib.parse.unquote(p) for p in u.path.split("/")[1:]]
        try:
            # HF API
            if len(parts) >= 6 and parts[0] == "api" and parts[1] in ("models", "datasets") \
                    and parts[4] in ("revision", "tree"):
                return self.hf_api(parts[1], parts[2] + "/" + parts[3], parts[4], parts[5])
            # ModelScope API
            if len(parts) >= 6 and parts[:2] == ["api", "v1"] and parts[2] in ("models", "datasets"):
                repo = parts[3] + "/" + parts[4]
                if parts[5:] == ["repo", "files"]:
                    return self.ms_files(parts[2], repo, q.get("Revision", ["master"])[0])
                if parts[5:] == ["repo"]:
                    return self.ms_file(parts[2], repo, q.get("Revision", ["master"])[0],
                                        q.get("FilePath", [""])[0])
            if parts and parts[0] == "_lfs" and len(parts) >= 5:
                kind = parts[1]
                repo = parts[2] + "/" + parts[3]
                d = self.repo_dir(kind, repo)
                return self.serve_file(d, "/".join(parts[4:]), repo, lfs_final=True)
            # HF resolve
            kind = "models"
            if parts and parts[0] == "datasets":
                kind = "datasets"
                parts = parts[1:]
            if len(parts) >= 5 and parts[2] == "resolve":
                return self.hf_resolve(kind, parts[0] + "/" + parts[1], parts[3],
                                       "/".join(parts[4:]))
            self.not_found("Not found")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def hf_api(self, kind, repo, what, rev):
        if self.general_fault("@listing") == "done":
            return
        d = self.repo_dir(kind, repo)
        if d is None:
            return self.not_found()
        if not self.rev_ok(repo, rev):
            return self.not_found("Revision not found")
        files = []
        for rel, full in list_files(d):
            s256, s1, size = file_hashes(full)
            files.append((rel, s256, s1, size))
        if what == "tree":
            out = []
            for rel, s256, s1, size in files:
                e = {"type": "file", "path": rel, "size": size, "oid": s1}
                if is_lfs(rel, size):
                    e["lfs"] = {"oid": s256, "size": size, "pointerSize": 134}
                out.append(e)
            return self.send_json(200, out)
        sib = []
        for rel, s256, s1, size in files:
            e = {"rfilename": rel, "size": size, "blobId": s1}
            if is_lfs(rel, size):
                e["lfs"] = {"sha256": s256, "size": size, "pointerSize": 134}
            sib.append(e)
        self.send_json(200, {"id": repo, "modelId": repo, "sha": commit_of(repo),
                             "private": False, "siblings": sib})

    def hf_resolve(self, kind, repo, rev, rel):
        d = self.repo_dir(kind, repo)
        if d is None:
            return self.not_found()
        if not self.rev_ok(repo, rev):
            return self.not_found("Revision not found")
        full = os.path.join(d, rel)
        if ".." in rel.split("/") or not os.path.isfile(full):
            return self.not_found("Entry not found")
        s256, s1, size = file_hashes(full)
        if is_lfs(rel, size):
            host = self.headers.get("Host", "127.0.0.1")
            loc = "%s://%s/_lfs/%s/%s/%s" % ("https" if ARGS.tls_cert else "http", host, kind, repo,
                                             urllib.parse.quote(rel))
            self.send_response(302)
            self.send_header("Location", loc)
            self.send_header("X-Repo-Commit", commit_of(repo))
            self.send_header("X-Linked-Etag", '"%s"' % s256)
            self.send_header("X-Linked-Size", str(size))
            self.send_header("ETag", '"%s"' % s1)
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.log(status=302, sent=0, file=rel)
            return
        self.serve_file(d, rel, repo)

    def ms_files(self, kind, repo, rev):
        if self.general_fault("@listing") == "done":
            return
        d = self.repo_dir(kind, repo)
        if d is None:
            return self.not_found()
        if not self.rev_ok(repo, rev):
            return self.not_found("Revision not found")
        out = []
        for rel, full in list_files(d):
            s256, s1, size = file_hashes(full)
            out.append({"Name": rel.split("/")[-1], "Path": rel, "Type": "blob", "Size": size,
                        "Sha256": s256, "Revision": commit_of(repo), "IsLFS": is_lfs(rel, size)})
        self.send_json(200, {"Code": 200, "Data": {"Files": out}, "Message": "success",
                             "Success": True})

    def ms_file(self, kind, repo, rev, rel):
        d = self.repo_dir(kind, repo)
        if d is None:
            return self.not_found()
        if not self.rev_ok(repo, rev):
            return self.not_found("Revision not found")
        self.serve_file(d, rel, repo)

    def serve_file(self, d, rel, repo, lfs_final=False):
        if d is None:
            return self.not_found()
        full = os.path.join(d, rel)
        if ".." in rel.split("/") or not os.path.isfile(full):
            return self.not_found("Entry not found")
        r = self.general_fault(rel)
        if r == "done":
            return
        s256, s1, size = file_hashes(full)
        start, end = 0, size - 1
        rng = self.headers.get("Range")
        code = 200
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            start = int(a) if a else 0
            if b:
                end = min(int(b), size - 1)
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % size)
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.log(status=416, sent=0, file=rel, range_start=start)
                return
            code = 206
        length = end - start + 1
        self.send_response(code)
        self.send_header("Content-Length", str(length))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", '"%s"' % (s256 if lfs_final or is_lfs(rel, size) else s1))
        self.send_header("X-Repo-Commit", commit_of(repo))
        if code == 206:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        self.end_headers()
        if self.command == "HEAD":
            self.log(status=code, sent=0, file=rel, range_start=start)
            return
        kind = r.get("kind") if r else None
        count = length
        if kind == "drop":
            count = max(0, min(length, int(r.get("after", 0)) - start))
        self.wfile.flush()
        sent = 0
        with open(full, "rb") as f:
            if kind == "corrupt":
                f.seek(start)
                data = bytearray(f.read(count))
                if data:
                    data[len(data) // 2] ^= 0x01
                self.connection.sendall(bytes(data))
                sent = len(data)
            elif count > 0:
                sent = self.connection.sendfile(f, start, count)
        self.log(status=code, sent=sent, file=rel, range_start=start)
        if kind == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--root", required=True)
    p.add_argument("--port-file", required=True)
    p.add_argument("--faults")
    p.add_argument("--token")
    p.add_argument("--log")
    p.add_argument("--tls-cert", help="serve https with this PEM certificate (and --tls-key)")
    p.add_argument("--tls-key")
    ARGS = p.parse_args()
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 128
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if ARGS.tls_cert:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.tls_cert, ARGS.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    tmp = ARGS.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(tmp, ARGS.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
