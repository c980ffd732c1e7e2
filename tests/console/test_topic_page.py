"""The topic and overview pages (issue 40): an Offline column as `eoslog topics describe` has, and a legend
that tells the two marks apart: a shaded row is under-replicated, a marked last stable offset is held back
by an open transaction (the legend used to explain the shading as an open transaction); the overview's
throughput has a rate and a line on its first poll."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import confluent_kafka
import jinja2
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from eoslog.console.app import create_app
from eoslog.console.server import ConsoleServer
from eoslog.console.views import Session
from eoslog.tools.admin_requests import PartitionView, TopicView

TEMPLATES = Path(__file__).resolve().parents[2] / "src/eoslog/console/templates"


def _rows(html: str) -> dict[int, str]:
    return {int(n): row for n, row in re.findall(r'<tr data-partition="(\d+)"(.*?)</tr>', html, re.DOTALL)}


def test_under_replicated_offline_and_open_transaction_marks_are_told_apart():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True)
    env.tests["not_authorized"] = lambda value: False
    topic = TopicView("t", False, [
        PartitionView(0, 1, [1, 2, 3], [1, 2, 3], [], 0, 5, 5),
        PartitionView(1, 1, [1, 2, 3], [1, 2], [3], 0, 5, 5),  # broker 3 is down
        PartitionView(2, 2, [1, 2, 3], [1, 2, 3], [], 0, 9, 4),  # an open transaction from offset 4
    ])
    html = env.get_template("topic.html").render(topic=topic, configs=[], page="topics", bootstrap="b:1")
    rows = _rows(html)
    assert 'class=""' in rows[0] and 'class="warn"' in rows[1] and 'class=""' in rows[2]
    assert [re.search(r'<td class="offline">([^<]*)</td>', rows[p]).group(1) for p in (0, 1, 2)] == ["-", "3", "-"]
    assert [bool(re.search(r'class="lso pinned"', rows[p])) for p in (0, 1, 2)] == [False, False, True]
    [legend] = re.findall(r'<p class="hint" id="partitions-legend">(.*?)</p>', html, re.DOTALL)
    legend = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", legend))
    assert "A shaded row is under-replicated" in legend
    assert "A marked last stable offset, below the high watermark, is held back by an open transaction" in legend


@pytest.mark.interop
def test_the_page_served_shows_the_offline_column(eoslog_broker):
    admin = AdminClient({"bootstrap.servers": eoslog_broker})
    for future in admin.create_topics([NewTopic("paged", 1, 1)]).values():
        future.result(30)
    producer = confluent_kafka.Producer({"bootstrap.servers": eoslog_broker})
    producer.produce("paged", b"v")
    assert producer.flush(10) == 0
    server = ConsoleServer(create_app(Session(eoslog_broker))).start()
    try:
        with urllib.request.urlopen(server.url + "/topics/paged", timeout=30) as response:
            html = response.read().decode()
    finally:
        server.stop()
    assert "<th>Offline</th>" in html and 'id="partitions-legend"' in html
    [row] = _rows(html).values()
    assert '<td class="offline">-</td>' in row and '<td class="hw">1</td>' in row


@pytest.mark.interop
def test_the_overview_shows_a_rate_and_a_line_on_its_first_poll(eoslog_broker):
    """It said "measuring…" with an empty chart until a second poll, 2 s later."""
    server = ConsoleServer(create_app(Session(eoslog_broker))).start()
    try:
        with urllib.request.urlopen(server.url + "/overview/throughput", timeout=30) as response:
            html = response.read().decode()
    finally:
        server.stop()
    assert re.search(r'<strong id="rate">(\d+)</strong>', html), html
    [points] = re.findall(r'<polyline points="([^"]*)"/>', html)
    assert len(points.split()) == 2, html
