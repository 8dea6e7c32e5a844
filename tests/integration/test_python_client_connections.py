"""The Python client's connections, against small HTTP servers of the standard library that
count what reaches them: one kept-alive connection per calling thread, a request sent again
only when a reused connection was closed before any answer, and transport failures raised as
urllib.error.URLError."""
import http.server
import json
import threading
import urllib.error
from concurrent.futures import ThreadPoolExecutor

import pytest

from gatescope_client import Client, GatescopeError


class CountingHandler(http.server.BaseHTTPRequestHandler):
    """Answers GET /n with {"n": n}; what it does besides depends on server.mode:
    "keep" keeps every connection, "close-after" closes each connection after its answer
    (without saying so), "drop-second" closes a connection on its second request without
    answering, "drop-all" closes on every request without answering."""
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.requests_here = 0
        with self.server.lock:
            self.server.connections += 1

    def do_GET(self):
        self.requests_here += 1
        with self.server.lock:
            self.server.requests += 1
        mode = self.server.mode
        if mode == "drop-all" or (mode == "drop-second" and self.requests_here == 2):
            self.close_connection = True
            return
        if self.path == "/missing":
            body, status = json.dumps({"error": "unknown model 'missing'"}).encode(), 404
        else:
            body, status = json.dumps({"n": int(self.path.strip("/"))}).encode(), 200
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        if mode == "close-after":
            self.close_connection = True

    def log_message(self, *args):
        pass


@pytest.fixture
def fake():
    def start(mode):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
        server.daemon_threads = True
        server.mode, server.lock, server.connections, server.requests = mode, threading.Lock(), 0, 0
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        return server, Client(f"http://127.0.0.1:{server.server_port}", timeout=10)

    started = []
    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def test_one_thread_keeps_one_connection(fake):
    server, client = fake("keep")
    assert [client._json("GET", f"/{i}")["n"] for i in range(20)] == list(range(20))
    assert (server.connections, server.requests) == (1, 20)
    with pytest.raises(GatescopeError) as e:  # an error answer keeps the connection too
        client._json("GET", "/missing")
    assert e.value.status == 404 and e.value.message == "unknown model 'missing'"
    assert client._json("GET", "/7")["n"] == 7
    assert (server.connections, server.requests) == (1, 22)
    client.close()  # closes it; the next call opens another
    assert client._json("GET", "/8")["n"] == 8
    assert server.connections == 2


def test_each_thread_has_its_own_connection(fake):
    server, client = fake("keep")
    with ThreadPoolExecutor(4) as pool:
        barrier = threading.Barrier(4)

        def work(t):
            barrier.wait()  # all four threads exist before any finishes
            return [client._json("GET", f"/{t * 100 + i}")["n"] for i in range(10)]
        results = list(pool.map(work, range(4)))
    assert results == [[t * 100 + i for i in range(10)] for t in range(4)]
    assert (server.connections, server.requests) == (4, 40)


def test_a_connection_closed_while_idle_is_replaced_before_sending(fake):
    server, client = fake("close-after")
    assert [client._json("GET", f"/{i}")["n"] for i in range(5)] == list(range(5))
    assert (server.connections, server.requests) == (5, 5)  # nothing sent twice


def test_a_reused_connection_closed_under_a_request_sends_it_once_more(fake):
    server, client = fake("drop-second")
    assert client._json("GET", "/1")["n"] == 1
    assert client._json("GET", "/2")["n"] == 2  # dropped on the reused one, answered anew
    assert (server.connections, server.requests) == (2, 3)


def test_a_new_connection_closed_under_a_request_is_an_error_not_a_resend(fake):
    server, client = fake("drop-all")
    with pytest.raises(urllib.error.URLError):
        client._json("GET", "/1")
    assert (server.connections, server.requests) == (1, 1)


def test_no_server_is_a_url_error():
    probe = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CountingHandler)
    port = probe.server_port
    probe.server_close()  # a port that was free a moment ago and has no listener now
    with pytest.raises(urllib.error.URLError) as e:
        Client(f"http://127.0.0.1:{port}", timeout=5).live()
    assert isinstance(e.value.reason, ConnectionRefusedError)


def test_urls_other_than_http_are_refused():
    with pytest.raises(ValueError):
        Client("ftp://127.0.0.1:8000")
