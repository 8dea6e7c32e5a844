"""The browser viewer (/viewer/, docs/viewer.md) in headless Chromium, driven by Debian's
chromium-driver through selenium, against the real server: the shown top label is the one
Predict gives for the same image; maps render non-uniform pixels on colour bars whose numbers
are the map's own range from Explain; layer and head switches redraw; a segmentation mask
covers exactly the foreground pixels Explain counts; a query-pixel click re-explains;
detections, their badges and sampling points are all drawn; typed text is read piece by
piece, shaded with Explain's values, and a truncated text says so; compare mode shares one
scale when asked; a token-protected server serves the page and takes the token typed into it; the
browser logs no errors (a Content-Security-Policy violation would be one)."""
import base64
import json
import pathlib
import re
import shutil
import urllib.request

import numpy as np
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from gatescope.data import colin27
from gatescope.data import detection_scenes as ds
from gatescope.data.fashion_mnist import write_pngs
from gatescope.data.png import encode_gray_png
from server_harness import REPO, serve_shipped, start_server, stop_server

CLASSIFIER, OTHER = "dgvit_fmnist", "vit_fmnist"
SEGMENTER, DETECTOR = "pvt_gdla_colin27", "plug_detr_scenes"
TEXT, OTHER_TEXT = "dgt_wordnet", "difftransformer_wordnet"
TOKEN = "viewer-test-token-0123456789"
WAIT_S = 30  # the longest wait for one analysis (a few tiny models on two CPU threads)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    yield from serve_shipped(tmp_path_factory,
                             [CLASSIFIER, OTHER, SEGMENTER, DETECTOR, TEXT, OTHER_TEXT])


@pytest.fixture(scope="module")
def driver():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    d.set_page_load_timeout(20)
    d.set_script_timeout(10)
    yield d
    d.quit()


@pytest.fixture(scope="module")
def pngs(tmp_path_factory):
    """Two Fashion-MNIST test images as the other tests write them, a Colin27 slice, and a
    held-out detection scene."""
    out = tmp_path_factory.mktemp("images")
    files = {f"fmnist{i}": p for i, (p, _) in enumerate(write_pngs(out, start=9100, count=2))}
    files["slice"] = out / "slice.png"
    files["slice"].write_bytes(encode_gray_png(colin27.load_slices()["test"]["images"][0]))
    if not ds.mnist_available():
        pytest.fail("MNIST is missing: run scripts/fetch_mnist.sh (scripts/test.sh does)")
    files["scene"] = out / "scene.png"
    files["scene"].write_bytes(encode_gray_png(ds.make_scene("heldout", 1, seed=1234)[0]))
    return files


def rest(server, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{server.http_port}{path}", data=data,
                                     method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(request, timeout=30))


def b64(path):
    return base64.b64encode(pathlib.Path(path).read_bytes()).decode()


def tensor(t):
    data = np.frombuffer(base64.b64decode(t["data"]),
                         dtype="<f4" if t["dtype"] == "FLOAT32" else np.uint8)
    return data.reshape([int(s) for s in t["shape"]])


def open_viewer(driver, server, path="/"):
    """Loads the page (from `/`, which redirects to /viewer/) and waits for the models."""
    driver.get(f"http://127.0.0.1:{server.http_port}{path}")
    assert driver.current_url.endswith("/viewer/")
    WebDriverWait(driver, 10).until(
        lambda d: len(Select(d.find_element(By.ID, "model")).options) > 0)


def finished_runs(driver):
    return int(driver.find_element(By.ID, "results").get_attribute("data-run") or 0)


def choose_models(driver, model, compare):
    """Picks `model` (and `compare` as the second one, or compare off) and waits until the
    analyses that selecting may start (of the previous input) are over; returns how many
    analyses have finished."""
    Select(driver.find_element(By.ID, "model")).select_by_value(model)
    box = driver.find_element(By.ID, "compare")
    if box.is_selected() != (compare is not None):
        box.click()
    if compare:
        Select(driver.find_element(By.ID, "model2")).select_by_value(compare)
    WebDriverWait(driver, WAIT_S).until(
        lambda d: d.find_element(By.ID, "results").get_attribute("data-state") != "running")
    return finished_runs(driver)


def analyse(driver, model, image, compare=None, drop=False):
    """Picks the models (choose_models), gives the page `image` through the file picker (or
    a synthetic drop) and waits for the analysis."""
    before = choose_models(driver, model, compare)
    if drop:
        driver.execute_script("""
            const bytes = Uint8Array.from(atob(arguments[0]), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], arguments[1], {type: "image/png"}));
            const zone = document.getElementById("drop");
            const event = {dataTransfer: transfer, bubbles: true, cancelable: true};
            zone.dispatchEvent(new DragEvent("dragover", event));
            zone.dispatchEvent(new DragEvent("drop", event));
        """, b64(image), pathlib.Path(image).name)
    else:
        driver.find_element(By.ID, "file").send_keys(str(image))
    WebDriverWait(driver, WAIT_S).until(lambda d: finished_runs(d) > before)
    results = driver.find_element(By.ID, "results")
    assert results.get_attribute("data-state") == "done", results.text


def analyse_text(driver, model, text, compare=None):
    """As analyse, with `text` typed into the text box and Analyse pressed."""
    before = choose_models(driver, model, compare)
    field = driver.find_element(By.ID, "text")
    field.clear()
    # send_keys types outside the Basic Multilingual Plane badly; set the value instead.
    driver.execute_script("arguments[0].value = arguments[1]", field, text)
    driver.find_element(By.ID, "analyse-text").click()
    WebDriverWait(driver, WAIT_S).until(lambda d: finished_runs(d) > before)


def pieces(driver, model, key):
    """[(characters, value, background)] of the pieces in text tile `key` of `model`."""
    return driver.execute_script("""
        const [model, key] = arguments;
        const spans = document.querySelectorAll(
            `.panel[data-model="${model}"] .pieces[data-key="${key}"] .piece`);
        return Array.from(spans, (s) => [s.textContent, +s.dataset.value,
                                         getComputedStyle(s).backgroundColor]);
    """, model, key)


def panel(driver, model):
    return driver.find_element(By.CSS_SELECTOR, f'.panel[data-model="{model}"]')


def find(driver, model, css):
    """The element `css` inside `model`'s panel."""
    return panel(driver, model).find_element(By.CSS_SELECTOR, css)


def texts(driver, model, css):
    return [e.text for e in panel(driver, model).find_elements(By.CSS_SELECTOR, css)]


def map_pixels(driver, model, key):
    """(width, height, RGBA bytes) of the map canvas `key` in `model`'s panel."""
    return driver.execute_script("""
        const [model, key] = arguments;
        const c = document.querySelector(
            `.panel[data-model="${model}"] canvas.map[data-key="${key}"]`);
        const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
        return [c.width, c.height, Array.from(data)];
    """, model, key)


def colour_bar(driver, model, key):
    """The data attributes and printed labels of the colour bar beside map `key`."""
    return driver.execute_script("""
        const [model, key] = arguments;
        const bar = document.querySelector(
            `.panel[data-model="${model}"] .tile[data-key="${key}"] .colourbar`);
        const label = (c) => {
          const e = bar.querySelector(`.bar-label.${c}`);
          return e ? e.textContent : null;
        };
        const d = bar.dataset;
        return {low: +d.low, high: +d.high, min: +d.min, max: +d.max,
                diverging: d.diverging === "true", high_label: label("high"),
                low_label: label("low"), zero_label: label("zero")};
    """, model, key)


def assert_no_browser_errors(driver):
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


def test_classifier_label_rollout_and_colour_bar(server, driver, pngs):
    image = pngs["fmnist0"]
    open_viewer(driver, server)
    analyse(driver, CLASSIFIER, image)
    want = rest(server, f"/v2/models/{CLASSIFIER}/predict", {"image": b64(image), "top_k": 5})
    shown = find(driver, CLASSIFIER, ".top-label").text
    assert shown == want["classes"][0]["label"]
    scores = [float(t) for t in texts(driver, CLASSIFIER, ".topk .score")]
    np.testing.assert_allclose(scores, [c["probability"] for c in want["classes"]], atol=6e-4)

    rollout = tensor(rest(server, f"/v2/models/{CLASSIFIER}/explain",
                          {"image": b64(image), "rollout": True})["rollout"])
    w, h, rgba = map_pixels(driver, CLASSIFIER, "rollout")
    assert (h, w) == rollout.shape == (4, 4)
    rgb = np.array(rgba, dtype=np.uint8).reshape(h, w, 4)[..., :3]
    assert len({tuple(p) for p in rgb.reshape(-1, 3)}) > 4  # not one flat colour
    # Viridis on [0, max]: the largest value is the top colour, the smallest the darkest.
    flat, lum = rollout.reshape(-1), (rgb.reshape(-1, 3).astype(float) @ [0.299, 0.587, 0.114])
    assert tuple(rgb.reshape(-1, 3)[flat.argmax()]) == (0xfd, 0xe7, 0x25)
    assert lum.argmin() == flat.argmin()
    bar = colour_bar(driver, CLASSIFIER, "rollout")
    assert bar["min"] == pytest.approx(float(rollout.min()), rel=1e-6)
    assert bar["max"] == pytest.approx(float(rollout.max()), rel=1e-6)
    assert (bar["low"], bar["diverging"]) == (0, False)
    assert bar["high"] == pytest.approx(float(rollout.max()), rel=1e-6)
    assert float(bar["high_label"]) == pytest.approx(float(rollout.max()), rel=5e-3)
    assert bar["low_label"] == "0"
    assert shown in find(driver, CLASSIFIER, '.tile[data-key="rollout"] .headline').text

    # The gate map of the last layer, then of head 2 of layer 0: other pixels, same label.
    _, _, mean_gate = map_pixels(driver, CLASSIFIER, "gates")
    Select(panel(driver, CLASSIFIER).find_element(By.NAME, "head")).select_by_value("2")
    Select(panel(driver, CLASSIFIER).find_element(By.NAME, "layer")).select_by_value("0")
    gates = rest(server, f"/v2/models/{CLASSIFIER}/explain", {"image": b64(image), "gates": True})
    want_gate = tensor(gates["gates"][0])[2]
    gate_bar = colour_bar(driver, CLASSIFIER, "gates")
    assert gate_bar["max"] == pytest.approx(float(want_gate.max()), rel=1e-6)
    assert gate_bar["min"] == pytest.approx(float(want_gate.min()), rel=1e-6)
    assert map_pixels(driver, CLASSIFIER, "gates")[2] != mean_gate
    assert find(driver, CLASSIFIER, '.tile[data-key="gates"] .detail').text == \
        "layer 0 \u00B7 head 2"
    # M-DGSA attention is signed: a diverging bar centred on zero.
    attention = colour_bar(driver, CLASSIFIER, "attention")
    assert attention["diverging"] and attention["low"] == -attention["high"]
    assert attention["zero_label"] == "0"
    # The signed ("raw") rollout: explained again, drawn on a diverging scale.
    Select(panel(driver, CLASSIFIER).find_element(By.NAME, "signedMaps")).select_by_value("raw")
    WebDriverWait(driver, WAIT_S).until(
        lambda d: colour_bar(d, CLASSIFIER, "rollout")["diverging"]
        and panel(d, CLASSIFIER).get_attribute("data-state") == "done")
    raw = tensor(rest(server, f"/v2/models/{CLASSIFIER}/explain",
                      {"image": b64(image), "rollout": True,
                       "rollout_options": {"signed_maps": "raw"}})["rollout"])
    bar = colour_bar(driver, CLASSIFIER, "rollout")
    assert bar["min"] == pytest.approx(float(raw.min()), rel=1e-6)
    assert bar["high"] == pytest.approx(float(np.abs(raw).max()), rel=1e-6) == -bar["low"]
    driver.save_screenshot("/tmp/viewer_classifier.png")
    assert_no_browser_errors(driver)


def test_compare_two_classifiers_on_a_shared_scale(server, driver, pngs):
    image = pngs["fmnist1"]
    open_viewer(driver, server)
    analyse(driver, CLASSIFIER, image, compare=OTHER)
    rollouts = {}
    for model in (CLASSIFIER, OTHER):
        want = rest(server, f"/v2/models/{model}/predict", {"image": b64(image), "top_k": 1})
        assert find(driver, model, ".top-label").text == want["classes"][0]["label"]
        rollouts[model] = tensor(rest(server, f"/v2/models/{model}/explain",
                                      {"image": b64(image), "rollout": True})["rollout"])
    per_tile = {m: colour_bar(driver, m, "rollout") for m in rollouts}
    for m, r in rollouts.items():
        assert per_tile[m]["high"] == pytest.approx(float(r.max()), rel=1e-6)
    Select(driver.find_element(By.ID, "scale")).select_by_value("shared")
    top = max(float(r.max()) for r in rollouts.values())
    for m, r in rollouts.items():
        bar = colour_bar(driver, m, "rollout")
        assert bar["high"] == pytest.approx(top, rel=1e-6) and bar["low"] == 0
        assert bar["max"] == pytest.approx(float(r.max()), rel=1e-6)  # its own range still marked
    driver.set_window_size(1400, 1500)
    driver.save_screenshot("/tmp/viewer_compare.png")
    driver.set_window_size(1400, 1000)
    Select(driver.find_element(By.ID, "scale")).select_by_value("tile")
    assert_no_browser_errors(driver)


def test_segmentation_mask_legend_and_query_pixel(server, driver, pngs):
    open_viewer(driver, server)
    analyse(driver, SEGMENTER, pngs["slice"], drop=True)
    image = colin27.load_slices()["test"]["images"][0]
    height, width = image.shape
    explained = rest(server, f"/v2/models/{SEGMENTER}/explain",
                     {"image": b64(pngs["slice"]), "gates": True,
                      "query_pixel": {"y": height // 2, "x": width // 2}})
    pixels = [int(n) for n in explained["segmentation"]["class_pixels"]]
    coloured = driver.execute_script("""
        const c = document.querySelector(`.panel[data-model="${arguments[0]}"] canvas.mask`);
        const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 3; i < d.length; i += 4) n += d[i] > 0;
        return [c.width, c.height, n];
    """, SEGMENTER)
    assert coloured == [width, height, sum(pixels) - pixels[0]]  # all but the background
    shares = texts(driver, SEGMENTER, ".legend .score")
    assert shares == [f"{100 * n / sum(pixels):.1f} %" for n in pixels]
    gate = tensor(explained["gates"][0])  # stage 0, the coarsest, is shown first
    w, h, _ = map_pixels(driver, SEGMENTER, "gate")
    assert (h, w) == gate.shape
    assert colour_bar(driver, SEGMENTER, "gate")["max"] == \
        pytest.approx(float(gate.max()), rel=1e-6)

    # A click on the input moves the query pixel; the map is Explain's for that pixel.
    before = map_pixels(driver, SEGMENTER, "query")[2]
    picture = find(driver, SEGMENTER, '.tile[data-kind="input"] .stack')
    webdriver.ActionChains(driver).move_to_element_with_offset(picture, -40, -50).click().perform()

    def detail(d):
        return find(d, SEGMENTER, '.tile[data-key="query"] .detail').text

    WebDriverWait(driver, WAIT_S).until(
        lambda d: f"({height // 2}, {width // 2})" not in detail(d)
        and panel(d, SEGMENTER).get_attribute("data-state") == "done")
    y, x = map(int, re.search(r"pixel \((\d+), (\d+)\)", detail(driver)).groups())
    assert y < height // 2 and x < width // 2
    moved = rest(server, f"/v2/models/{SEGMENTER}/explain",
                 {"image": b64(pngs["slice"]), "query_pixel": {"y": y, "x": x}})
    query = tensor(moved["query_attention"][0])
    bar = colour_bar(driver, SEGMENTER, "query")
    assert bar["diverging"] and bar["max"] == pytest.approx(float(query.max()), rel=1e-6)
    assert bar["min"] == pytest.approx(float(query.min()), rel=1e-6)
    assert map_pixels(driver, SEGMENTER, "query")[2] != before
    driver.save_screenshot("/tmp/viewer_segmentation.png")
    assert_no_browser_errors(driver)


def test_detections_badges_and_sampling_points(server, driver, pngs):
    open_viewer(driver, server)
    analyse(driver, DETECTOR, pngs["scene"])
    explained = rest(server, f"/v2/models/{DETECTOR}/explain",
                     {"image": b64(pngs["scene"]), "max_detections": 10, "plug_gates": True})
    detections = explained["detections"]
    assert detections, "the held-out scene should have detections"
    assert texts(driver, DETECTOR, ".detections .label") == [d["label"] for d in detections]
    top = find(driver, DETECTOR, '.tile[data-kind="detections"] .headline').text
    assert detections[0]["label"] in top
    # Per detection: the box twice (outline and colour) and its numbered badge.
    assert len(texts(driver, DETECTOR, '.tile[data-kind="detections"] svg rect')) == \
        3 * len(detections)
    badges = driver.execute_script("""
        const tile = document.querySelector(
            `.panel[data-model="${arguments[0]}"] .tile[data-kind="detections"]`);
        return Array.from(tile.querySelectorAll("svg rect[rx]"),
                          (r) => ["x", "y", "width", "height"].map((a) => +r.getAttribute(a)));
    """, DETECTOR)
    for i, (x, y, w, h) in enumerate(badges):  # no badge covers another
        for u, v, p, q in badges[i + 1:]:
            assert x + w <= u or u + p <= x or y + h <= v or v + q <= y
    # [layers, heads, levels, points]: the last layer's points of every detection.
    weights = tensor(explained["detection_maps"][0]["attention_weights"])
    dots = texts(driver, DETECTOR, '.tile[data-kind="sampling_points"] svg circle')
    assert len(dots) == len(detections) * weights[0].size
    encoder = colour_bar(driver, DETECTOR, "encoder_gate")
    assert encoder["diverging"] and encoder["low"] == -encoder["high"]
    driver.save_screenshot("/tmp/viewer_detection.png")
    assert_no_browser_errors(driver)


def test_a_token_protected_server_serves_the_page_and_takes_the_token(driver, pngs, tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(REPO / "model_repository" / CLASSIFIER, repo / CLASSIFIER)
    (tmp_path / "tokens").write_text(f"{TOKEN}\n")
    server = start_server(tmp_path, repo, [f"--auth_tokens_file={tmp_path / 'tokens'}"])
    try:
        driver.get(f"http://127.0.0.1:{server.http_port}/viewer/")  # no token needed
        status = driver.find_element(By.ID, "status")
        WebDriverWait(driver, 10).until(lambda d: "401" in status.text)
        field = driver.find_element(By.ID, "token")
        field.send_keys(TOKEN + "\n")
        WebDriverWait(driver, 10).until(
            lambda d: len(Select(d.find_element(By.ID, "model")).options) == 1)
        analyse(driver, CLASSIFIER, pngs["fmnist0"])
        assert panel(driver, CLASSIFIER).find_element(By.CSS_SELECTOR, ".top-label").text
        assert driver.execute_script("return sessionStorage.getItem('gatescope.token')") == TOKEN
    finally:
        driver.execute_script("sessionStorage.clear()")
        assert stop_server(server) == 0, server.log()
    # The 401 answers of the first model listing are the only errors the browser logged.
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert all("401" in e["message"] for e in severe), severe


def test_scale_rules_and_a_near_flat_map(server, driver):
    """The viewer's own modules, run in the page: scales by the picture rules, and a
    near-flat map drawn as flat and labelled so instead of stretched."""
    open_viewer(driver, server)
    out = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        Promise.all([import("./scale.js"), import("./tile.js")]).then(([scale, tile]) => {
          const flat = new Float32Array([0.5, 0.5001, 0.5002, 0.5]);
          const s = scale.scaleFor(scale.rangeOf(flat), {stretch: true});
          const spec = {key: "flat", kind: "test", title: "t", values: flat, w: 2, h: 2,
                        signed: false, overlay: false};
          const node = tile.mapTile(spec, s, {headline: "h"});
          document.body.append(node);
          const c = node.querySelector("canvas.map");
          const of = (values, options) =>
              scale.scaleFor(scale.rangeOf(new Float32Array(values)), options);
          done({flat: scale.isNearFlat(scale.rangeOf(flat)), scale: s,
                badge: node.querySelector(".flat-badge").textContent,
                pixels: Array.from(c.getContext("2d").getImageData(0, 0, 2, 2).data),
                negative: of([-0.2, 0.5]), signed: of([0.1, 0.4], {signed: true}),
                stretched: of([0.2, 0.5], {stretch: true}), fromZero: of([0.2, 0.5]),
                notFlat: scale.isNearFlat(scale.rangeOf(new Float32Array([0.5, 0.52]))),
                numbers: [0, 0.04123, -0.19649, 4.3e-5, 12345].map(scale.formatNumber)});
        }, (e) => done({error: String(e)}));
    """)
    assert "error" not in out, out
    assert out["flat"] and not out["notFlat"]
    # Stretching was asked for, but a near-flat map keeps the scale from zero.
    assert out["scale"] == {"diverging": False, "low": 0, "high": pytest.approx(0.5002)}
    assert out["badge"] == "near-flat: all \u2248 0.5"
    assert len({tuple(out["pixels"][i:i + 3]) for i in range(0, 16, 4)}) == 1
    assert out["negative"] == {"diverging": True, "low": -0.5, "high": 0.5}
    assert out["signed"] == {"diverging": True, "low": pytest.approx(-0.4),
                             "high": pytest.approx(0.4)}
    assert out["stretched"] == {"diverging": False, "low": pytest.approx(0.2), "high": 0.5}
    assert out["fromZero"] == {"diverging": False, "low": 0, "high": 0.5}
    assert out["numbers"] == ["0", "0.0412", "-0.196", "4.3e-5", "1.23e+4"]
    assert_no_browser_errors(driver)


def test_text_pieces_shaded_by_explain(server, driver):
    text = "a small caf\u00e9 where \U0001F600 people drink coffee, read and talk"
    open_viewer(driver, server)
    Select(driver.find_element(By.ID, "model")).select_by_value(TEXT)
    assert driver.find_element(By.ID, "text-form").is_displayed()
    assert not driver.find_element(By.ID, "drop").is_displayed()
    analyse_text(driver, TEXT, text)
    assert driver.find_element(By.ID, "results").get_attribute("data-state") == "done"
    body = base64.b64encode(text.encode()).decode()
    want = rest(server, f"/v2/models/{TEXT}/predict", {"text": body, "top_k": 5})
    assert find(driver, TEXT, ".top-label").text == want["classes"][0]["label"]
    scores = [float(t) for t in texts(driver, TEXT, ".topk .score")]
    np.testing.assert_allclose(scores, [c["probability"] for c in want["classes"]], atol=6e-4)

    explained = rest(server, f"/v2/models/{TEXT}/explain",
                     {"text": body, "rollout": True, "gates": True})
    tokens = explained["text"]["tokens"]
    shown = pieces(driver, TEXT, "rollout")
    # One span per piece, over the request's own characters (code point offsets), in order;
    # the leading byte pieces of the characters spelled in bytes are empty marks.
    assert len(shown) == len(tokens) and "".join(p[0] for p in shown) == text
    assert [p[0] == "" for p in shown] == [t["begin"] == t["end"] for t in tokens]
    assert sum(p[0] == "" for p in shown) >= 3  # the emoji's first three bytes at least
    rollout = tensor(explained["rollout"])
    np.testing.assert_allclose([p[1] for p in shown], rollout, rtol=1e-6)
    assert shown[int(rollout.argmax())][2] == "rgb(253, 231, 37)"  # viridis' top
    bar = colour_bar(driver, TEXT, "rollout")
    assert bar["max"] == pytest.approx(float(rollout.max()), rel=1e-6)
    assert bar["min"] == pytest.approx(float(rollout.min()), rel=1e-6)
    assert (bar["low"], bar["diverging"]) == (0, False)
    assert find(driver, TEXT, ".read").text == f"read all {len(tokens)} pieces"
    assert want["classes"][0]["label"] in \
        find(driver, TEXT, '.tile[data-key="rollout"] .headline').text

    # Head 1 of layer 0: the gate pieces carry Explain's gate of that head.
    Select(panel(driver, TEXT).find_element(By.NAME, "head")).select_by_value("1")
    Select(panel(driver, TEXT).find_element(By.NAME, "layer")).select_by_value("0")
    gate = tensor(explained["gates"][0])[1]
    np.testing.assert_allclose([p[1] for p in pieces(driver, TEXT, "gates")], gate, rtol=1e-6)
    assert find(driver, TEXT, '.tile[data-key="gates"] .detail').text == "layer 0 \u00B7 head 1"
    attention = colour_bar(driver, TEXT, "attention")  # M-DGSA attention is signed
    assert attention["diverging"] and attention["low"] == -attention["high"]
    driver.save_screenshot("/tmp/viewer_text.png")

    # A text longer than max_tokens: the pieces read, then the rest unshaded, and a note.
    long_text = " ".join(["the tall old oak tree in the quiet park"] * 12)
    analyse_text(driver, TEXT, long_text)
    read = rest(server, f"/v2/models/{TEXT}/explain",
                {"text": base64.b64encode(long_text.encode()).decode()})["text"]
    assert read["truncated"] and len(read["tokens"]) == 64
    shown = pieces(driver, TEXT, "rollout")
    unread = find(driver, TEXT, '.pieces[data-key="rollout"] .unread').text
    assert len(shown) == 64 and "".join(p[0] for p in shown) + unread == long_text
    assert read["pieces_read"] == 64
    read_chars = len("".join(p[0] for p in shown))
    assert read["chars_read"] == read_chars
    assert find(driver, TEXT, ".read").text.startswith(
        f"read the first 64 pieces, {read_chars} of {len(long_text)} characters (max_tokens 64)")
    driver.save_screenshot("/tmp/viewer_text_truncated.png")
    assert_no_browser_errors(driver)


def test_compare_two_text_models_and_refuse_an_image_model(server, driver):
    text = "a tool used for cutting wood"
    body = base64.b64encode(text.encode()).decode()
    open_viewer(driver, server)
    analyse_text(driver, TEXT, text, compare=OTHER_TEXT)
    assert driver.find_element(By.ID, "results").get_attribute("data-state") == "done"
    rollouts = {}
    for model in (TEXT, OTHER_TEXT):
        want = rest(server, f"/v2/models/{model}/predict", {"text": body, "top_k": 1})
        assert find(driver, model, ".top-label").text == want["classes"][0]["label"]
        rollouts[model] = tensor(rest(server, f"/v2/models/{model}/explain",
                                      {"text": body, "rollout": True})["rollout"])
    Select(driver.find_element(By.ID, "scale")).select_by_value("shared")
    top = max(float(r.max()) for r in rollouts.values())
    for model, r in rollouts.items():
        bar = colour_bar(driver, model, "rollout")
        assert bar["high"] == pytest.approx(top, rel=1e-6)
        assert bar["max"] == pytest.approx(float(r.max()), rel=1e-6)
    driver.save_screenshot("/tmp/viewer_text_compare.png")
    Select(driver.find_element(By.ID, "scale")).select_by_value("tile")
    # An image model beside a text model: its panel says what it reads, not a failure.
    analyse_text(driver, TEXT, text, compare=CLASSIFIER)
    message = find(driver, CLASSIFIER, ".panel-error").text
    assert message == "this model reads image, and the input is text"
    assert panel(driver, CLASSIFIER).get_attribute("data-state") == "skipped"
    assert driver.find_element(By.ID, "results").get_attribute("data-state") == "done"
    status = driver.find_element(By.ID, "status")
    assert status.text.endswith("done (1 reads another kind of input)")
    assert "error" not in status.get_attribute("class")
    # An image model first, with no image given on this page yet: the text panels go and
    # the page asks for an image.
    driver.find_element(By.ID, "compare").click()
    Select(driver.find_element(By.ID, "model")).select_by_value(CLASSIFIER)
    results = driver.find_element(By.ID, "results")
    WebDriverWait(driver, WAIT_S).until(lambda d: results.get_attribute("data-state") == "idle")
    assert results.find_elements(By.CSS_SELECTOR, ".panel") == []
    assert status.text == "choose or drop an image"
    assert driver.find_element(By.ID, "drop").is_displayed()
    assert not driver.find_element(By.ID, "text-form").is_displayed()
    assert_no_browser_errors(driver)
