"""The gatescope client: one server, its HTTP port. Thread-safe: each thread keeps one
kept-alive connection of its own (http.client from the standard library, so no dependency
beyond numpy; a TLS handshake per call would cost more than a small model's forward)."""
import base64
import http.client
import json
import os
import select
import ssl
import threading
import urllib.error
import urllib.parse
import weakref

import numpy as np

from gatescope_client import tensors


class GatescopeError(Exception):
    """A call the server refused: `status` is the HTTP status, `message` the server's words
    (e.g. 400 "ModelInfer: ...", 404 "unknown model 'x'", 503 while draining)."""

    def __init__(self, status, message):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class TransportError(urllib.error.URLError):
    """The server could not be reached, or a connection failed before the whole answer was
    read: an OSError, a urllib.error.URLError (what the client raised when it called through
    urllib), its `reason` the underlying error (ConnectionError, ssl.SSLError,
    http.client.HTTPException)."""


class TransportTimeout(TransportError, TimeoutError):
    """No answer within the client's `timeout`; also a TimeoutError (socket.timeout)."""


def _transport_error(error):
    cls = TransportTimeout if isinstance(error, TimeoutError) else TransportError
    return cls(error)


# A reused connection failing with one of these before any of the answer arrived was closed
# by the server while idle (or on the way): the request is sent once more.
_CLOSED_UNDER_US = (http.client.RemoteDisconnected, ConnectionError, ssl.SSLEOFError)


def _dropped(connection):
    """True when an idle kept-alive connection can no longer carry a request: the server
    closed it (its idle timeout) or sent something unasked. Readable while idle means
    either."""
    sock = connection.sock
    if sock is None:
        return True
    try:
        poller = select.poll()  # poll, not select: descriptors above 1024 work too
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


class Client:
    """A gatescope server at `url` (its --http_port; https:// with `ssl_context`, e.g.
    ssl.create_default_context(cafile=...) and, for mutual TLS, load_cert_chain). `token`:
    the bearer token when the server checks them. `timeout`: seconds per call.

    Each thread that calls keeps one HTTP/1.1 connection open across calls; `close()` (or
    leaving a `with Client(...)` block) closes them all. A forked child opens its own. A
    request is sent again, once, on a new connection only when a reused connection ends
    before any of its answer arrived: how the server's closing of an idle connection shows
    (after 60 s), and the server answers every request it has read, so a request is not
    carried out twice unless the server died under it. Proxy settings of the environment
    are not used: the client connects to `url` itself."""

    def __init__(self, url="http://127.0.0.1:8000", token=None, ssl_context=None, timeout=60.0):
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self._ssl = ssl_context
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http:// or https:// URL: {url!r}")
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(f"a server URL has no query, fragment or user: {url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path
        self._start_process()

    def _start_process(self):
        """Connection state of this process: new, and none inherited through fork (a
        parent's connection answers the parent)."""
        self._pid = os.getpid()
        self._local = threading.local()  # .connection: this thread's, or None
        self._lock = threading.Lock()  # guards _open
        # Every thread's connection, for close(); weak, so that a finished thread's
        # connection goes with its thread-local reference.
        self._open = weakref.WeakSet()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Closes every thread's connection; a call in flight on one may still complete or
        fail. Later calls open new connections."""
        if self._pid != os.getpid():
            return self._start_process()
        with self._lock:
            open_now, self._open = list(self._open), weakref.WeakSet()
        for c in open_now:
            c.close()

    # --- transport ---------------------------------------------------------------------

    def _new_connection(self):
        if self._https:
            c = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout,
                                            context=self._ssl)
        else:
            c = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout)
        c.auto_open = 0  # connected here only: a closed connection fails, never reopens
        with self._lock:
            self._open.add(c)
        return c

    def _forget(self, connection):
        connection.close()
        with self._lock:
            self._open.discard(connection)
        if getattr(self._local, "connection", None) is connection:
            self._local.connection = None

    def _exchange(self, method, path, body, headers):
        """One request and its whole answer on this thread's connection: (response, bytes)."""
        if self._pid != os.getpid():
            self._start_process()
        c = getattr(self._local, "connection", None)
        with self._lock:
            closed = c is not None and c not in self._open  # by close()
        if c is not None and (closed or _dropped(c)):
            self._forget(c)
            c = None
        reused = c is not None
        try:
            if c is None:
                c = self._local.connection = self._new_connection()
                c.connect()
            try:
                c.request(method, self._prefix + path, body=body, headers=headers)
                r = c.getresponse()  # raises RemoteDisconnected when no answer came at all
            except _CLOSED_UNDER_US as e:
                self._forget(c)
                if reused:  # closed under us before any of the answer: send it once more
                    return self._exchange(method, path, body, headers)
                raise _transport_error(e) from e
            data = r.read()
        except TransportError:
            raise
        except (OSError, http.client.HTTPException) as e:
            if c is not None:
                self._forget(c)
            raise _transport_error(e) from e
        except BaseException:
            # Interrupted part-way (KeyboardInterrupt, a bad header value): the connection
            # is in an unknown state, so the next call gets a new one.
            if c is not None:
                self._forget(c)
            raise
        if r.will_close:
            self._forget(c)
        return r, data

    def _call(self, method, path, body=None, headers=None):
        """(status, headers, body bytes); raises GatescopeError for an error status and
        TransportError (TransportTimeout) when no whole answer could be read."""
        h = dict(headers or {})
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
            h.setdefault("Content-Type", "application/json")
        r, raw = self._exchange(method, path, body, h)
        if r.status >= 300:  # the server never redirects
            try:
                message = json.loads(raw)["error"]
            except (ValueError, KeyError, TypeError):
                message = raw.decode(errors="replace").strip() or r.reason
            raise GatescopeError(r.status, message)
        return r.status, r.headers, raw

    def _json(self, method, path, body=None):
        return json.loads(self._call(method, path, body)[2] or b"null")

    @staticmethod
    def _model_path(model, version):
        path = "/v2/models/" + urllib.parse.quote(model, safe="")
        return path + ("/versions/" + urllib.parse.quote(version, safe="") if version else "")

    def _status_ok(self, path):
        try:
            return self._call("GET", path)[0] == 200
        except GatescopeError:
            return False

    # --- health and information ----------------------------------------------------------

    def live(self):
        return self._status_ok("/v2/health/live")

    def ready(self):
        return self._status_ok("/v2/health/ready")

    def model_ready(self, model, version=""):
        return self._status_ok(self._model_path(model, version) + "/ready")

    def models(self):
        """Every model of the repository: [{"name", "version", "state", "reason"}]."""
        return self._json("POST", "/v2/repository/index", {})

    def metadata(self, model, version=""):
        """The gatescope metadata of a model: task, labels, input spec, maps, layers..."""
        return self._json("GET", self._model_path(model, version) + "/gatescope")["config"]

    def config(self, model, version=""):
        """Triton's model configuration (batching, instances, parameters)."""
        return self._json("GET", self._model_path(model, version) + "/config")

    def statistics(self, model="", version=""):
        path = (self._model_path(model, version) if model else "/v2/models") + "/stats"
        return self._json("GET", path)["model_stats"]

    # --- gatescope.v1: predict and explain -----------------------------------------------

    @staticmethod
    def _input(image):
        """An encoded image (bytes: PNG/JPEG) or pixels (numpy uint8 [C,H,W] / [H,W], or
        float32 already normalised) as the v1 request's input field."""
        if isinstance(image, (bytes, bytearray)):
            return {"image": base64.b64encode(bytes(image)).decode("ascii")}
        return {"tensor": tensors.to_v1_tensor(image)}

    def predict(self, model, image, version="", **fields):
        """One example's prediction: {"classes": [{"label", "index", "probability"}],
        "segmentation": {"mask": numpy, ...}, "detections": [...]} as the task answers.
        `fields` are PredictRequest's (top_k, mask_png, class_probabilities,
        score_threshold, max_detections, priority, timeout_microseconds)."""
        body = {**self._input(image), **fields}
        out = self._json("POST", self._model_path(model, version) + "/predict", body)
        return tensors.decode_v1(out, png_fields=("mask_png",))

    def explain(self, model, image, version="", rollout=True, **fields):
        """One example's explanation: every map as numpy ("rollout" [gh, gw], "gates" per
        layer, "attention" per requested layer, ...), "rollout_png" as PNG bytes.
        `fields` are ExplainRequest's (gates, attention_layers, heatmap_png, top_k,
        resonance, rollout_options={...}, query_pixel={"y","x"}, ...)."""
        body = {**self._input(image), "rollout": rollout, **fields}
        out = self._json("POST", self._model_path(model, version) + "/explain", body)
        return tensors.decode_v1(out, png_fields=("rollout_png",))

    # --- KServe v2 inference -------------------------------------------------------------

    def infer(self, model, inputs, version="", outputs=None, classification=None,
              request_id="", parameters=None):
        """KServe v2 inference with binary tensors both ways. `inputs`: one numpy array
        [B, ...] (FP32 normalised, UINT8 pixels, or an object array of encoded images), or
        {name: array}. `outputs`: names to return (default: all, metadata order);
        `classification`: k, to get each output as its top-k "score:index:label" strings.
        Returns {output name: numpy array}."""
        if not isinstance(inputs, dict):
            inputs = {"input": inputs}
        header = {"inputs": [], "parameters": {"binary_data_output": True}}
        if request_id:
            header["id"] = request_id
        if parameters:
            header["parameters"].update(parameters)
        blobs = []
        for name, array in inputs.items():
            array = np.asarray(array)
            datatype = tensors.kserve_datatype(array)
            raw = tensors.kserve_bytes(array, datatype)
            header["inputs"].append({"name": name, "datatype": datatype,
                                     "shape": [int(d) for d in array.shape],
                                     "parameters": {"binary_data_size": len(raw)}})
            blobs.append(raw)
        if outputs is not None or classification is not None:
            names = outputs if outputs is not None else [
                o["name"] for o in self._json("GET", self._model_path(model, version))["outputs"]]
            header["outputs"] = [
                {"name": n, "parameters": {"binary_data": True,
                                           **({"classification": int(classification)}
                                              if classification else {})}}
                for n in names]
        head = json.dumps(header).encode()
        _, headers, raw = self._call(
            "POST", self._model_path(model, version) + "/infer", head + b"".join(blobs),
            {"Inference-Header-Content-Length": str(len(head)),
             "Content-Type": "application/octet-stream"})
        n = int(headers.get("Inference-Header-Content-Length", len(raw)))
        meta = json.loads(raw[:n])
        result, pos = {}, n
        for o in meta["outputs"]:
            size = o.get("parameters", {}).get("binary_data_size")
            if size is None:
                data = np.array(o["data"], dtype=object if o["datatype"] == "BYTES"
                                else tensors.KSERVE_DTYPES[o["datatype"]])
                result[o["name"]] = data.reshape(o["shape"])
            else:
                result[o["name"]] = tensors.kserve_array(raw[pos:pos + size], o["datatype"],
                                                         o["shape"])
                pos += size
        return result
