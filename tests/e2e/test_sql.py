"""`make sql` runs the template's named queries (sql/*.sql) with DuckDB over an archive laid out
as the archiver writes it (trail/dt=YYYY-MM-DD/hour=HH/*.jsonl.gz, one item's JSON line a line),
with the Glue table's columns and string partitions, as Athena would; with `SOURCE=ocsf` the
same questions (sql/ocsf/*.sql) over the OCSF Parquet copy of those lines (audit-ocsf's objects)
give the same answers, from fewer bytes."""

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

from local.sql import bytes_scanned, canonical, connect, connect_ocsf, glue_columns, main, parameters, run

ROOT = Path(__file__).resolve().parents[2]

LINES = {
    "trail/dt=2026-11-22/hour=10/p1795341600-0001-a1.jsonl.gz": [
        {"messageId": "a", "auditTime": "2026-11-22T10:00:00.000Z", "actor": "alice", "action": "user.login",
         "outcome": "failure", "sourceIp": "203.0.113.7", "actorKey": "alice#1", "receiveCount": 1,
         "extra": {"ticket": "T-1", "amount": 12345678901234567890}},
        {"messageId": "b", "auditTime": "2026-11-22T10:05:00.000Z", "actor": "alice", "action": "invoice.delete",
         "resource": "invoice/4711", "outcome": "success", "auditText": "deleted"},
        {"messageId": "c", "auditTime": "2026-11-22T11:00:00.000Z", "actor": "bob", "action": "user.login",
         "outcome": "failure", "sourceIp": "203.0.113.7"},
    ],
    # Archived the next day (dt is the day the object was written), an event of the 22nd among them.
    "trail/dt=2026-11-23/hour=00/p1795392000-0004-a1.jsonl.gz": [
        {"messageId": "d", "auditTime": "2026-11-22T23:59:59.999Z", "actor": "carol", "action": "user.login",
         "outcome": "failure", "sourceIp": "2001:db8::1"},
        {"messageId": "e", "auditTime": "2026-11-23T00:00:01.000Z", "auditText": "free text only"},
    ],
}


@pytest.fixture
def archive(tmp_path):
    for key, lines in LINES.items():
        path = tmp_path / key
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.writelines(json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n" for line in lines)
    return tmp_path


def query(archive, name, actor=None, start="2026-11-22T00:00:00Z", end="2026-11-23T23:59:59Z", first_day=None):
    params = parameters(name, actor, canonical(start), canonical(end), first_day)
    return run(name, connect(archive), params)


def test_the_view_has_the_glue_tables_columns_and_string_partitions(archive):
    con = connect(archive)
    described = [(r[0], r[1]) for r in con.execute("DESCRIBE trail").fetchall()]
    assert described == glue_columns() + [("dt", "VARCHAR"), ("hour", "VARCHAR")]
    # extra is its JSON text, numbers with their digits (Athena's OpenX SerDe gives the same).
    (extra,) = con.execute("SELECT extra FROM trail WHERE messageId = 'a'").fetchone()
    assert json.loads(extra) == {"ticket": "T-1", "amount": 12345678901234567890}


def test_one_actors_events_in_a_time_range_in_time_order(archive):
    header, rows = query(archive, "actor", actor="alice", end="2026-11-22T10:04:59Z")
    assert header[:2] == ["auditTime", "action"]
    assert [r[header.index("messageId")] for r in rows] == ["a"]
    header, rows = query(archive, "actor", actor="alice")
    assert [r[header.index("messageId")] for r in rows] == ["a", "b"]


def test_events_per_action_per_day_count_by_audit_time_not_archive_day(archive):
    header, rows = query(archive, "actions")
    assert header == ["audit_day", "action_name", "events"]
    assert rows == [("2026-11-22", "user.login", 3), ("2026-11-22", "invoice.delete", 1),
                    ("2026-11-23", "(no action)", 1)]


def test_failures_by_source_ip_most_first(archive):
    header, rows = query(archive, "failures")
    assert header == ["sourceIp", "failures", "actors", "first_failure", "last_failure"]
    assert rows == [("203.0.113.7", 2, 2, "2026-11-22T10:00:00.000Z", "2026-11-22T11:00:00.000Z"),
                    ("2001:db8::1", 1, 1, "2026-11-22T23:59:59.999Z", "2026-11-22T23:59:59.999Z")]


def test_the_first_day_prunes_partitions_and_times_take_any_offset(archive):
    # The first day read is the day before --from (in UTC: 01:00+02:00 is the 21st) by default;
    # a later one skips dt=2026-11-22.
    assert parameters("actions", None, canonical("2026-11-22T01:00:00+02:00"), "x", None)[0] == "2026-11-20"
    _, rows = query(archive, "failures", first_day="2026-11-23")
    assert rows == [("2001:db8::1", 1, 1, "2026-11-22T23:59:59.999Z", "2026-11-22T23:59:59.999Z")]
    with pytest.raises(ValueError):
        canonical("2026-11-22T10:00:00")


def test_an_empty_archive_answers_no_rows(tmp_path):
    _, rows = query(tmp_path, "actions")
    assert rows == []


def test_make_sql_offline_prints_the_table(archive, capsys):
    assert main(["actor", "--actor", "alice", "--archive-dir", str(archive), "--no-pull"]) == 0
    out = capsys.readouterr().out
    assert "invoice.delete" in out and "(2 rows)" in out
    assert main(["actor", "--archive-dir", str(archive), "--no-pull"]) == 2  # no --actor


@pytest.fixture
def lake(archive, tmp_path_factory):
    """The OCSF Parquet copy of the archive's lines: target/debug/audit-ocsf over each object."""
    # --bin, not -p: the workspace's feature set, which `make test-build` built (with -p, cargo
    # would build audit-ocsf's dependencies again with that package's features alone).
    subprocess.run(["cargo", "build", "--quiet", "--bin", "audit-ocsf"], cwd=ROOT,
                   check=True, env=dict(os.environ, CARGO_TERM_COLOR="never"))
    out = tmp_path_factory.mktemp("lake")
    for key in LINES:
        lines = gzip.decompress((archive / key).read_bytes()).decode()
        done = subprocess.run([str(ROOT / "target" / "debug" / "audit-ocsf"), "--object", key, "--out", str(out)],
                              input=lines, capture_output=True, text=True)
        assert (done.returncode, done.stderr) == (0, ""), done.stderr
    return out


@pytest.mark.parametrize("name, actor", [("actor", "alice"), ("actor", "bob"), ("actions", None),
                                         ("failures", None)])
def test_the_ocsf_copy_gives_the_same_answers(archive, lake, name, actor):
    params = parameters(name, actor, canonical("2026-11-22T00:00:00Z"), canonical("2026-11-23T23:59:59Z"), None)
    over_trail = run(name, connect(archive), params)
    over_ocsf = run(name, connect_ocsf(lake), params, "ocsf")
    assert over_ocsf == over_trail
    assert over_trail[1], "an answer with rows"
    scanned, objects = bytes_scanned(name, "ocsf", lake)
    assert objects == 4 and 0 < scanned < sum(p.stat().st_size for p in lake.rglob("*.parquet"))
    assert bytes_scanned(name, "trail", archive) == (sum((archive / k).stat().st_size for k in LINES), 2)


def test_make_sql_over_the_ocsf_copy_prints_the_table_and_the_bytes(lake, capsys):
    assert main(["actions", "--source", "ocsf", "--ocsf-dir", str(lake), "--no-pull", "--bytes"]) == 0
    captured = capsys.readouterr()
    assert "user.login" in captured.out and "(3 rows)" in captured.out
    assert "sql/ocsf/actions_per_day.sql" in captured.err and "-- scanned " in captured.err
