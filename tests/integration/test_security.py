"""TLS, mutual TLS and bearer tokens on the real server, with a CA, server and client
certificates made at test time by Debian's openssl: what each token may call over both APIs
and /metrics (HTTPS, mutual TLS), that plaintext and certificate-less clients cannot connect, that the client CLI
talks to such a server, and that bad security flags stop the server at start."""
import http.client
import json
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest

from gatescope.data.png import encode_gray_png
from server_harness import (BUILD, REPO, import_api_modules, start_server, stop_server,
                            unix_socket_path)

MODEL = "dgvit_fmnist"
USER = "user-token-4f1c2b9a7d"
ADMIN = "admin-token-8e3d6a0c55"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
            "-subj", "/CN=gatescope test CA", cwd=d)
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    for name in ("server", "client"):
        openssl("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN=gatescope test {name}", cwd=d)
        extra = ["-extfile", "server.ext"] if name == "server" else []
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", *extra, cwd=d)
    (d / "tokens").write_text(f"# inference users\n{USER}\n")
    (d / "admin").write_text(f"{ADMIN}\n")
    return d


@pytest.fixture(scope="module")
def server(tmp_path_factory, pki):
    repo = tmp_path_factory.mktemp("repo")
    shutil.copytree(REPO / "model_repository" / MODEL, repo / MODEL)
    srv = start_server(tmp_path_factory.mktemp("server"), repo, [
        f"--tls_cert_file={pki / 'server.crt'}", f"--tls_key_file={pki / 'server.key'}",
        f"--tls_client_ca_file={pki / 'ca.crt'}", f"--auth_tokens_file={pki / 'tokens'}",
        f"--admin_tokens_file={pki / 'admin'}", "--model_control=explicit"])
    yield srv
    assert stop_server(srv) == 0, srv.log()


@pytest.fixture(scope="module")
def apis(tmp_path_factory):
    return import_api_modules(tmp_path_factory.mktemp("stubs"))


def channel(server, pki, client_cert=True):
    read = lambda name: (pki / name).read_bytes()
    creds = grpc.ssl_channel_credentials(
        root_certificates=read("ca.crt"),
        private_key=read("client.key") if client_cert else None,
        certificate_chain=read("client.crt") if client_cert else None)
    return grpc.secure_channel(server.address, creds)


def bearer(token):
    return [("authorization", f"Bearer {token}")] if token else []


def image():
    return encode_gray_png(np.zeros((28, 28), np.uint8))


def code_of(call):
    try:
        call()
    except grpc.RpcError as err:
        return err.code()
    return grpc.StatusCode.OK


def test_tokens_decide_what_each_caller_may_do(server, pki, apis):
    kv, kv_grpc, v1, v1_grpc = apis
    with channel(server, pki) as ch:
        gs, ks = v1_grpc.InferenceStub(ch), kv_grpc.GRPCInferenceServiceStub(ch)
        predict = v1.PredictRequest(model_name=MODEL, image=image(), top_k=1)
        for token, want in ((None, grpc.StatusCode.UNAUTHENTICATED),
                            ("user-token-4f1c2b9a7e", grpc.StatusCode.UNAUTHENTICATED),
                            (USER, grpc.StatusCode.OK), (ADMIN, grpc.StatusCode.OK)):
            assert code_of(lambda: gs.Predict(predict, metadata=bearer(token), timeout=30)) == want
            assert code_of(lambda: ks.ModelMetadata(kv.ModelMetadataRequest(name=MODEL),
                                                    metadata=bearer(token), timeout=30)) == want
        answer = gs.Predict(predict, metadata=bearer(USER), timeout=30)
        assert len(answer.classes) == 1 and answer.classes[0].label
        # Health is exempt by default (probes carry no token).
        assert ks.ServerLive(kv.ServerLiveRequest(), timeout=30).live
        # Model control: admin tokens only.
        load = kv.RepositoryModelLoadRequest(model_name=MODEL)
        assert code_of(lambda: ks.RepositoryModelLoad(load, metadata=bearer(USER), timeout=60)) \
            == grpc.StatusCode.PERMISSION_DENIED
        assert code_of(lambda: ks.RepositoryModelLoad(load, timeout=60)) \
            == grpc.StatusCode.UNAUTHENTICATED
        assert code_of(lambda: ks.RepositoryModelLoad(load, metadata=bearer(ADMIN), timeout=120)) \
            == grpc.StatusCode.OK


def https_context(pki, client_cert=True):
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if client_cert:
        context.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))
    return context


def scrape(port, pki, token=None, client_cert=True, timeout=10):
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics",
                                     headers={"Authorization": f"Bearer {token}"} if token else {})
    return urllib.request.urlopen(request, timeout=timeout,
                                  context=https_context(pki, client_cert)).read().decode()


def test_rest_is_https_with_mutual_tls_and_the_same_tokens(server, pki):
    """The REST port follows gRPC: HTTPS with the server certificate, a client certificate
    required, and each route checked against the caller's token by category."""
    from gatescope_client import Client, GatescopeError
    base = f"https://127.0.0.1:{server.http_port}"
    user = Client(base, token=USER, ssl_context=https_context(pki))
    assert user.live()  # health exempt
    assert user.predict(MODEL, image(), top_k=1)["classes"][0]["label"]
    for token, status in ((None, 401), ("user-token-4f1c2b9a7e", 401)):
        with pytest.raises(GatescopeError) as e:
            Client(base, token=token, ssl_context=https_context(pki)).metadata(MODEL)
        assert e.value.status == status
    with pytest.raises(GatescopeError) as e:  # model control: admin only
        user._call("POST", f"/v2/repository/models/{MODEL}/load", {})
    assert e.value.status == 403
    admin = Client(base, token=ADMIN, ssl_context=https_context(pki))
    assert admin._call("POST", f"/v2/repository/models/{MODEL}/load", {})[0] == 200
    # No client certificate: no connection. With TLS 1.3 the server's certificate_required
    # alert reaches the client at its first write (URLError) or, if the request was already
    # sent, at its read of the response (ssl.SSLError), as timing has it.
    with pytest.raises((urllib.error.URLError, ssl.SSLError)):
        Client(base, token=USER, ssl_context=https_context(pki, client_cert=False),
               timeout=10).predict(MODEL, image())
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/v2/health/live", timeout=10)


def test_metrics_are_served_over_mutual_tls_and_need_a_token(server, pki):
    with pytest.raises(urllib.error.HTTPError) as err:
        scrape(server.metrics_port, pki)
    assert err.value.code == 401
    assert err.value.headers["WWW-Authenticate"].startswith("Bearer")
    assert "gatescope_inferences_total" in scrape(server.metrics_port, pki, USER)
    # Plain HTTP gets no answer; HTTPS without a client certificate fails the handshake.
    with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
        urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10)
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        scrape(server.metrics_port, pki, USER, client_cert=False)


def test_silent_tls_peers_neither_block_scrapes_nor_stay_open(server, pki):
    """Connections that never start their handshake hold only themselves: a scrape beside 40
    of them is answered at once, and each is closed after the 5 s handshake deadline."""
    silent = [socket.create_connection(("127.0.0.1", server.metrics_port)) for _ in range(40)]
    try:
        start = time.monotonic()
        assert "gatescope_inferences_total" in scrape(server.metrics_port, pki, USER)
        assert time.monotonic() - start < 2
        silent[0].settimeout(15)
        start = time.monotonic()
        assert silent[0].recv(1) == b""  # closed by the server
        assert time.monotonic() - start < 10
    finally:
        for s in silent:
            s.close()


def test_metrics_tls_false_keeps_metrics_on_plain_http(tmp_path, pki):
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "model_repository" / MODEL, repo / MODEL)
    srv = start_server(tmp_path, repo, [
        f"--tls_cert_file={pki / 'server.crt'}", f"--tls_key_file={pki / 'server.key'}",
        "--metrics_tls=false"])
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics_port}/metrics",
                                      timeout=10).read().decode()
        assert "gatescope_inferences_total" in body
    finally:
        assert stop_server(srv) == 0, srv.log()


def test_grpc_health_needs_a_token_unless_health_is_exempt(server, tmp_path, pki):
    """grpc.health.v1 (what probes call) is in the health category: open on the module's
    server (default exemption), token-only on a server with nothing exempt."""
    tls = ["--tls-ca", str(pki / "ca.crt"), "--tls-cert", str(pki / "client.crt"),
           "--tls-key", str(pki / "client.key")]
    open_probe = server.client("health", *tls)
    assert open_probe.returncode == 0, open_probe.stderr
    assert json.loads(open_probe.stdout.splitlines()[0])["status"] == "SERVING"
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "model_repository" / MODEL, repo / MODEL)
    with unix_socket_path() as unix_socket:
        srv = start_server(tmp_path, repo, [f"--auth_tokens_file={pki / 'tokens'}",
                                            "--auth_exempt=", f"--grpc_unix_socket={unix_socket}"])
        try:
            token = tmp_path / "token"
            token.write_text(USER)
            # The Unix socket (--grpc_unix_socket) checks tokens as the port does.
            client = str(BUILD / "client" / "gatescope-client")

            def health(address, *args):
                return subprocess.run([client, "health", "--server", address, *args],
                                      capture_output=True, text=True, timeout=60)

            for address in (srv.address, f"unix:{unix_socket}"):
                refused = health(address)
                assert refused.returncode != 0, address
                assert "UNAUTHENTICATED" in refused.stdout + refused.stderr, address
                for service in ("", MODEL):
                    ok = health(address, "--service", service, "--token-file", str(token))
                    assert ok.returncode == 0, ok.stdout + ok.stderr
                    assert json.loads(ok.stdout.splitlines()[0])["status"] == "SERVING"
        finally:
            assert stop_server(srv) == 0, srv.log()


def test_unusable_tls_files_stop_the_server(tmp_path, pki):
    """A key that does not match the certificate is refused at start, by gRPC or OpenSSL."""
    result = subprocess.run([str(BUILD / "server" / "gatescope-server"),
                             f"--model_repository={REPO / 'model_repository'}", "--grpc_port=0",
                             "--metrics_port=0", "--http_port=0", f"--tls_cert_file={pki / 'server.crt'}",
                             f"--tls_key_file={pki / 'client.key'}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "metrics HTTPS" in result.stderr or "key" in result.stderr.lower(), result.stderr


def test_clients_without_tls_or_certificate_cannot_connect(server, pki, apis):
    kv, kv_grpc, _, _ = apis
    live = kv.ServerLiveRequest()
    with grpc.insecure_channel(server.address) as plain:
        assert code_of(lambda: kv_grpc.GRPCInferenceServiceStub(plain).ServerLive(live, timeout=5)) \
            == grpc.StatusCode.UNAVAILABLE
    with channel(server, pki, client_cert=False) as anonymous:
        assert code_of(lambda: kv_grpc.GRPCInferenceServiceStub(anonymous).ServerLive(
            live, timeout=5)) == grpc.StatusCode.UNAVAILABLE


def test_client_cli_over_mutual_tls_with_a_token(server, pki, tmp_path):
    png = tmp_path / "zero.png"
    png.write_bytes(image())
    token = tmp_path / "token"
    token.write_text(f"\n  {USER}\n")
    tls = ["--tls-ca", str(pki / "ca.crt"), "--tls-cert", str(pki / "client.crt"),
           "--tls-key", str(pki / "client.key")]
    ok = server.client("predict", "--model", MODEL, *tls, "--token-file", str(token), str(png))
    assert ok.returncode == 0, ok.stderr
    assert '"label"' in ok.stdout
    refused = server.client("predict", "--model", MODEL, *tls, str(png))
    assert refused.returncode != 0
    assert "UNAUTHENTICATED" in refused.stdout + refused.stderr


def test_load_generator_over_https_with_mutual_tls_and_a_token(server, pki, tmp_path):
    """gatescope-perf --api rest: HTTPS verified against the CA, the client's certificate
    presented, the token on every request; without the token every request is counted
    UNAUTHENTICATED; a server certificate that does not name the server asked for, no
    client certificate, and plain HTTP to the HTTPS port get no answer (UNAVAILABLE)."""
    png = tmp_path / "zero.png"
    png.write_bytes(image())
    token = tmp_path / "token"
    token.write_text(f"{USER}\n")
    perf = [str(BUILD / "client" / "gatescope-perf"), "--server", f"127.0.0.1:{server.http_port}",
            "--api", "rest", "--model", MODEL, "--concurrency", "2", "--warmup-ms", "100",
            "--window-ms", "300", "--max-windows", "3"]
    tls = ["--tls-ca", str(pki / "ca.crt"), "--tls-cert", str(pki / "client.crt"),
           "--tls-key", str(pki / "client.key")]
    ok = subprocess.run(perf + tls + ["--token-file", str(token), str(png)],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    row = json.loads(ok.stdout.splitlines()[-1])
    assert row["ok"] > 0 and row["errors"] == {} and row["server_compute_infer_us"] > 0
    refused = subprocess.run(perf + tls + ["--inputs", "image", str(png)],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    row = json.loads(refused.stdout.splitlines()[-1])
    assert row["ok"] == 0 and list(row["errors"]) == ["UNAUTHENTICATED"]
    for connection in (tls + ["--tls-server-name", "elsewhere.example"],  # not its name
                       ["--tls-ca", str(pki / "ca.crt")],  # no client certificate
                       []):  # plain HTTP
        out = subprocess.run(perf + connection + ["--token-file", str(token), "--inputs",
                                                  "image", str(png)],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 2
        row = json.loads(out.stdout.splitlines()[-1])
        assert row["ok"] == 0 and list(row["errors"]) == ["UNAVAILABLE"], connection


@pytest.mark.parametrize("flags,message", [
    (["--tls_cert_file=x.crt"], "tls_cert_file and tls_key_file go together"),
    (["--tls_client_ca_file=ca.crt"], "needs tls_cert_file"),
    (["--auth_exempt=health,model_control"], "not a category that can be exempt"),
])
def test_bad_security_flags_stop_the_server(tmp_path, flags, message):
    result = subprocess.run([str(BUILD / "server" / "gatescope-server"),
                             f"--model_repository={REPO / 'model_repository'}", "--grpc_port=0",
                             "--metrics_port=-1", "--http_port=-1", *flags], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr


def test_short_tokens_stop_the_server(tmp_path):
    (tmp_path / "tokens").write_text("short\n")
    result = subprocess.run([str(BUILD / "server" / "gatescope-server"),
                             f"--model_repository={REPO / 'model_repository'}", "--grpc_port=0",
                             "--metrics_port=-1", "--http_port=-1", f"--auth_tokens_file={tmp_path / 'tokens'}"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "at least 16 characters" in result.stderr
