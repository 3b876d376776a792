"""`audit-ocsf` maps archived trail lines (tests/e2e/data/ocsf-trail-lines.jsonl: the sample
events of events/*.json as the receiver stores them, kept so by crates/ocsf/tests/records.rs) to
OCSF 1.3 Parquet; DuckDB reads every object back and each record validates against OCSF 1.3.0's
JSON Schema from the `ocsf-json-schema` package (docs/ocsf.md)."""

import json
import os
import re
import subprocess
from pathlib import Path

import duckdb
import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ocsf_json_schema import OcsfJsonSchemaEmbedded, get_ocsf_schema

ROOT = Path(__file__).resolve().parents[2]
LINES = ROOT / "tests" / "e2e" / "data" / "ocsf-trail-lines.jsonl"
OBJECT = "trail/dt=2026-11-22/hour=12/p1795348800-0000000000004421584500000000017450439091-a0.jsonl.gz"
KEY = re.compile(r"^ext/audit-receiver/region=([a-z0-9-]+)/accountId=(\d{12}|unknown)/eventDay=(\d{8})/"
                 r"(\d{4})-p1795348800-0000000000004421584500000000017450439091-a0\.zstd\.parquet$")
JSON_COLUMNS = {"unmapped"}  # OCSF's objects are structs and lists; unmapped is JSON text


@pytest.fixture(scope="module")
def audit_ocsf():
    """target/debug/audit-ocsf, built (or found up to date) by cargo."""
    # --bin, not -p: the workspace's feature set, which `make test-build` built (with -p, cargo
    # would build audit-ocsf's dependencies again with that package's features alone).
    subprocess.run(["cargo", "build", "--quiet", "--bin", "audit-ocsf"], cwd=ROOT,
                   check=True, env=dict(os.environ, CARGO_TERM_COLOR="never"))
    return ROOT / "target" / "debug" / "audit-ocsf"


def run(audit_ocsf, out, stdin):
    return subprocess.run([str(audit_ocsf), "--object", OBJECT, "--out", str(out)], input=stdin,
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def objects(audit_ocsf, tmp_path_factory):
    out = tmp_path_factory.mktemp("ocsf")
    done = run(audit_ocsf, out, LINES.read_text())
    assert (done.returncode, done.stderr) == (0, "")
    keys = [line.split("\t")[0] for line in done.stdout.splitlines()]
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.parquet")) == sorted(keys)
    return {key: rows(out / key) for key in keys}


def present(value):
    """A value read back with its absent (null) fields left out, as the record was written."""
    if isinstance(value, dict):
        return {k: present(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [present(v) for v in value]
    return value


def rows(path):
    """Each row as its OCSF record: null columns and fields left out, structs as objects, lists as
    arrays, unmapped read from its JSON (the key's partitions, which DuckDB would add as columns,
    are not the record's)."""
    con = duckdb.connect()
    cursor = con.execute("SELECT * FROM read_parquet(?, hive_partitioning = false)", [str(path)])
    names = [d[0] for d in cursor.description]
    return [{n: json.loads(v) if n in JSON_COLUMNS else present(v) for n, v in zip(names, row) if v is not None}
            for row in cursor.fetchall()]


def test_every_line_is_one_record_in_an_object_of_its_class_in_time_order(objects):
    lines = [json.loads(line) for line in LINES.read_text().splitlines()]
    records = [r for rs in objects.values() for r in rs]
    assert sorted((r["unmapped"]["trail"]["messageId"], r["unmapped"]["trail"]["lineNumber"]) for r in records) \
        == sorted((line["messageId"], n) for n, line in enumerate(lines))
    for key, rs in objects.items():
        region, account, day, class_uid = KEY.match(key).groups()
        assert {r["class_uid"] for r in rs} == {int(class_uid)}
        assert [r["time"] for r in rs] == sorted(r["time"] for r in rs)
        for r in rs:
            assert r["cloud"].get("region", "unknown") == region
            assert r["cloud"].get("account", {}).get("uid", "unknown") == account
            assert r["type_uid"] == r["class_uid"] * 100 + r["activity_id"]
            trail = r["unmapped"]["trail"]
            assert trail["object"] == OBJECT
            assert lines[trail["lineNumber"]]["auditTime"] == trail["auditTime"] == r["metadata"]["original_time"]


def test_pyarrow_reads_the_same_records_with_typed_nested_columns(audit_ocsf, tmp_path):
    """A second reader: pyarrow sees OCSF's objects as structs and lists of typed fields, zstd, and
    the same records DuckDB does."""
    done = run(audit_ocsf, tmp_path, LINES.read_text())
    assert done.returncode == 0, done.stderr
    for key in (line.split("\t")[0] for line in done.stdout.splitlines()):
        path = tmp_path / key
        table = pq.read_table(path)
        schema = table.schema
        assert schema.field("time").type == pa.int64()
        actor = schema.field("actor").type
        assert pa.types.is_struct(actor)
        assert actor.field("user").type.field("name").type == pa.string()
        assert pa.types.is_list(schema.field("resources").type)
        assert schema.field("resources").type.value_type.field("uid").type == pa.string()
        assert schema.field("metadata").type.field("profiles").type == pa.list_(pa.string())
        assert schema.field("unmapped").type == pa.string()
        meta = pq.ParquetFile(path).metadata
        assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {"ZSTD"}
        read = [{n: json.loads(v) if n in JSON_COLUMNS else present(v) for n, v in row.items() if v is not None}
                for row in table.to_pylist()]
        assert read == rows(path)
        # A reader can ask for one nested field alone (pyarrow gives it as its leaf's name).
        names = pq.read_table(path, columns=["actor.user.name"]).to_pylist()
        assert [r["name"] for r in names] == [r["actor"].get("user", {}).get("name") for r in read]


def test_every_record_validates_against_ocsf_1_3_0(objects):
    ocsf = OcsfJsonSchemaEmbedded(get_ocsf_schema(version="1.3.0"))
    checked = 0
    for rs in objects.values():
        for r in rs:
            assert r["metadata"]["version"] == "1.3.0"
            schema = ocsf.get_class_schema(class_name=ocsf.lookup_class_name_from_uid(class_uid=r["class_uid"]),
                                           profiles=r["metadata"]["profiles"])
            jsonschema.validate(r, schema, cls=jsonschema.Draft202012Validator)
            checked += 1
    assert checked == len(LINES.read_text().splitlines())


def test_sign_ins_are_authentications_and_a_foreign_item_is_high_severity(objects):
    records = {(r["unmapped"]["trail"]["messageId"], r["unmapped"]["trail"]["lineNumber"]): r
               for rs in objects.values() for r in rs}
    login = next(r for r in records.values() if r["api"]["operation"] == "ConsoleLogin")
    assert (login["class_uid"], login["activity_id"], login["status_id"]) == (3002, 1, 2)
    assert login["user"]["name"] == "bob"
    logins = [r for r in records.values() if r["api"]["operation"] == "user.login"]
    assert logins and all(r["class_name"] == "Authentication" for r in logins)
    foreign = next(r for (m, _), r in records.items() if m == "copied-item")
    assert (foreign["severity_id"], foreign["unmapped"]["trail"]["notAttested"]) == (4, "it has no attestation")
    deleted = next(r for r in records.values() if r["api"]["operation"] == "com.example.invoice.deleted")
    assert (deleted["activity_name"], deleted["api"]["service"]["name"]) == ("Delete", "https://billing.example.com/invoices")


def test_a_tamper_line_is_named_and_the_other_lines_still_written(audit_ocsf, tmp_path):
    tamper = json.dumps({"eventName": "MODIFY", "keys": {"auditTime": "2026-11-22T10:00:00.000Z", "messageId": "m"},
                         "newImage": None, "oldImage": {}})
    first = LINES.read_text().splitlines()[0]
    done = run(audit_ocsf, tmp_path, f"{tamper}\n{first}\n")
    assert done.returncode == 1
    assert done.stderr == "audit-ocsf: line 0 gives no record: the line is not an item: it has no string messageId and auditTime\n"
    (key,) = [line.split("\t")[0] for line in done.stdout.splitlines()]
    (row,) = rows(tmp_path / key)
    assert row["unmapped"]["trail"]["lineNumber"] == 1
