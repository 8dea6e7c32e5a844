"""The Python client's connections, against small HTTP servers of the standard library that
count what reaches them: one kept-alive connection per calling thread, a request sent again
only when a reused connection was closed before any answer, transport failures raised as
urllib.error.URLError (timeouts also as TimeoutError), and a forked child on its own
connection."""
import http.client
import http.server
import json
import os
import threading
import time
import urllib.error
from concurrent.futures import ThreadPoolExecutor

import pytest

from gatescope_client import Client, GatescopeError, TransportError, TransportTimeout


class CountingHandler(http.server.BaseHTTPRequestHandler):
    """Answers GET /n with {"n": n}; what it does besides depends on server.mode:
    "keep" keeps every connection, "close-after" closes each connection after its answer
    (without saying so), "drop-second" closes a connection on its second request without
    answering, "drop-all" closes on every request without answering, "stall" answers after 2 s."""
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
        if mode == "stall":
            time.sleep(2)
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


class CountingServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def shutdown_request(self, request):
        super().shutdown_request(request)
        self.closed.release()  # one connection closed by the server


@pytest.fixture
def fake():
    def start(mode):
        server = CountingServer(("127.0.0.1", 0), CountingHandler)
        server.mode, server.lock, server.connections, server.requests = mode, threading.Lock(), 0, 0
        server.closed = threading.Semaphore(0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        client = Client(f"http://127.0.0.1:{server.server_port}", timeout=10)
        started.append((server, client))
        return server, client

    started = []
    yield start
    for server, client in started:
        client.close()
        server.shutdown()
        server.server_close()


@pytest.fixture
def sends(monkeypatch):
    """How many requests the client puts on the wire (resends included)."""
    count = [0]
    original = http.client.HTTPConnection.request

    def counted(self, *args, **kwargs):
        count[0] += 1
        return original(self, *args, **kwargs)
    monkeypatch.setattr(http.client.HTTPConnection, "request", counted)
    return count


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


def test_a_connection_closed_while_idle_is_replaced_before_sending(fake, sends):
    server, client = fake("close-after")
    for i in range(5):
        assert client._json("GET", f"/{i}")["n"] == i
        assert server.closed.acquire(timeout=10)  # the server has closed it: now idle-closed
    assert (server.connections, server.requests) == (5, 5)
    assert sends[0] == 5  # noticed before sending: nothing sent on a closed connection


def test_a_reused_connection_closed_under_a_request_sends_it_once_more(fake, sends):
    server, client = fake("drop-second")
    assert client._json("GET", "/1")["n"] == 1
    assert client._json("GET", "/2")["n"] == 2  # dropped on the reused one, answered anew
    assert (server.connections, server.requests) == (2, 3)
    assert sends[0] == 3


def test_a_new_connection_closed_under_a_request_is_an_error_not_a_resend(fake):
    server, client = fake("drop-all")
    with pytest.raises(urllib.error.URLError):
        client._json("GET", "/1")
    assert (server.connections, server.requests) == (1, 1)


def test_no_server_is_a_url_error():
    probe = CountingServer(("127.0.0.1", 0), CountingHandler)
    port = probe.server_port
    probe.server_close()  # a port that was free a moment ago and has no listener now
    with Client(f"http://127.0.0.1:{port}", timeout=5) as client:
        with pytest.raises(urllib.error.URLError) as e:
            client.live()
    assert isinstance(e.value, TransportError)
    assert isinstance(e.value.reason, ConnectionRefusedError)


def test_no_answer_in_time_is_a_timeout_and_the_next_call_works(fake):
    server, _ = fake("keep")
    client = Client(f"http://127.0.0.1:{server.server_port}", timeout=0.5)
    server.mode = "stall"  # holds the answer for 2 s
    with pytest.raises(TimeoutError) as e:  # socket.timeout is TimeoutError
        client._json("GET", "/1")
    assert isinstance(e.value, TransportTimeout) and isinstance(e.value, urllib.error.URLError)
    server.mode = "keep"
    assert client._json("GET", "/2")["n"] == 2  # on a new connection: the old one is unsure
    assert server.connections == 2
    client.close()


def test_a_call_interrupted_part_way_leaves_the_next_one_working(fake):
    server, client = fake("keep")
    assert client._json("GET", "/1")["n"] == 1
    with pytest.raises(ValueError):  # http.client refuses the header after the request line
        client._call("GET", "/2", headers={"X-Bad": "a\nb"})
    assert client._json("GET", "/3")["n"] == 3
    assert server.requests == 2


def test_a_forked_child_opens_its_own_connection(fake):
    server, client = fake("keep")
    assert client._json("GET", "/1")["n"] == 1
    pid = os.fork()
    if pid == 0:  # the child: its answers on its own connection, then out without cleanup
        ok = all(client._json("GET", f"/{i}")["n"] == i for i in range(10, 20))
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [client._json("GET", f"/{i}")["n"] for i in range(2, 6)] == [2, 3, 4, 5]
    assert (server.connections, server.requests) == (2, 15)


def test_urls_other_than_a_server_are_refused():
    for url in ("ftp://127.0.0.1:8000", "http://127.0.0.1:8000/?q=1", "http://u:p@127.0.0.1:8000"):
        with pytest.raises(ValueError):
            Client(url)
