"""advise.html in a real headless Chromium (Debian's chromium + chromium-driver, driven by selenium):
it renders, its script runs, no console errors, and the screenshot shows the report.

Skipped, with the reason, only where Chromium, its driver or selenium cannot be had (.ci/run installs
them: ``apt-get install chromium chromium-driver``; selenium is in the dev extra).
"""

from __future__ import annotations

import io
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lbsim.advise.command import write_report
from lbsim.advise.html import DECISION_BG
from lbsim.advise.run import Request, advise, prepare
from lbsim.simulator.run import simulate

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
WIDTH, HEIGHT = 1280, 1000
ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync", "--hide-scrollbars",
        "--force-device-scale-factor=1", f"--window-size={WIDTH},{HEIGHT}")


def _missing() -> str | None:
    if CHROMIUM is None or DRIVER is None:
        return "Chromium is not installed here (apt-get install -y chromium chromium-driver; CI's .ci/run does it)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return 'selenium is not installed (pip install -e ".[dev]")'
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


class Inline:
    def map_unordered(self, fn: Callable[[Any], Any], items: Any) -> Iterator[tuple[str, Any]]:
        for key, payload in items:
            yield key, fn(payload)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    report, rows = advise(prepare(Request(cluster="2xV100,2xT4", network="10gbps", colocated="slowdown=2 on 1 node",
                                          budget_s=10.0, seeds=2)), simulate, Inline())
    folder = tmp_path_factory.mktemp("advise")
    write_report(folder, report, rows)
    return folder / "advise.html"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for a in ARGS:
        options.add_argument(a)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_the_report_renders_with_no_console_error(browser: Any, page: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri())
    assert errors(browser) == []
    assert browser.title.startswith("lbsim advise: 2xV100,2xT4 over 10 Gbit/s")
    assert browser.find_element(By.TAG_NAME, "html").get_attribute("data-schemes") == "9"  # the inline script ran
    decision = browser.find_element(By.ID, "decision")
    assert decision.is_displayed() and decision.text.startswith(("Use ", "It depends"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#results tbody tr")
    assert len(rows) == 9
    figure = browser.find_element(By.ID, "fig-speedup")
    assert figure.size["width"] > 500 and len(figure.find_elements(By.TAG_NAME, "circle")) == 9 * 2


def test_a_header_click_sorts_the_table(browser: Any, page: Path) -> None:
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri())

    def speedups() -> list[float]:
        return [float(td.get_attribute("data-v")) for td in
                browser.find_elements(By.CSS_SELECTOR, "#results tbody tr td:nth-child(2)")]

    header = browser.find_elements(By.CSS_SELECTOR, "#results thead th")[1]
    header.click()
    assert speedups() == sorted(speedups())
    header.click()
    assert speedups() == sorted(speedups(), reverse=True)
    assert errors(browser) == []


def test_the_screenshot_shows_the_report(browser: Any, page: Path, tmp_path: Path) -> None:
    from PIL import Image
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri())
    png = browser.get_screenshot_as_png()
    (tmp_path / "advise.png").write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.size[0] == WIDTH and image.size[1] > 0.8 * HEIGHT
    rgb = np.asarray(image)  # (height, width, 3); Image.getdata is deprecated (gone in Pillow 14)
    non_white = float((rgb != 255).any(axis=2).mean())
    assert 0.05 < non_white < 0.9  # something is drawn, and it is not a blank or a solid page
    box = browser.find_element(By.ID, "decision").rect
    inside = image.getpixel((int(box["x"] + box["width"] - 6), int(box["y"] + 4)))
    want = tuple(int(DECISION_BG[i:i + 2], 16) for i in (1, 3, 5))
    assert all(abs(a - b) <= 2 for a, b in zip(inside, want, strict=True)), (inside, want)
    header = browser.find_element(By.CSS_SELECTOR, "#results thead th").rect  # the table's header, below the box
    assert header["y"] > box["y"] + box["height"] and header["y"] + header["height"] < image.size[1]
    assert image.getpixel((int(header["x"] + 2), int(header["y"] + 2))) == (0xF6, 0xF8, 0xFA)


def test_a_page_with_a_script_error_is_caught(browser: Any, page: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(page.read_text(encoding="utf-8").replace("</main>", "</main><script>undefinedFunction();</script>"),
                      encoding="utf-8")
    browser.get(broken.as_uri())
    assert any("undefinedFunction" in e["message"] for e in errors(browser))
