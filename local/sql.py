"""`make sql`: the Athena named queries of template.yaml, run locally with DuckDB over the local
archive. No AWS account: the SQL is the same file (sql/*.sql) the template's named queries hold,
and the table the same columns as the template's Glue table.

    python -m local.sql {actor,actions,failures} [--actor A] [--from T1] [--to T2]
                        [--first-day YYYY-MM-DD] [--archive-dir DIR] [--no-pull] [--format table|csv]
                        [--source trail|ocsf] [--bytes]

With ``--source ocsf`` the same questions run over the OCSF Parquet copy instead (docs/ocsf.md
"Queries"): sql/ocsf/*.sql, the Glue table ``ocsf``'s columns, the objects of the stack's
OCSF_BUCKET under ext/ pulled into `.local/ocsf/`, read with DuckDB's read_parquet (OCSF's objects
are structs, read as `actor."user".name` in both; Athena's json_extract_scalar, for `unmapped`, is
DuckDB's json_extract_string). ``--bytes`` prints on stderr what Athena would scan for the answer:
every byte of the gzip JSON-lines objects read, or, for Parquet, the compressed column chunks of
the fields the query names (a struct's named fields only; DuckDB's parquet_metadata).

1. Pulls the archive's trail/ objects from the running local stack (`make local-up`; the endpoint
   and bucket from `.local/stack.env`, or AWS_ENDPOINT_URL and ARCHIVE_BUCKET) into
   `.local/archive/`, keeping their keys (trail/dt=YYYY-MM-DD/hour=HH/...jsonl.gz): the layout
   Athena's partition projection reads. Objects already there are not fetched again, and objects
   the bucket does not hold (an earlier stack's) are removed. With no stack running it says so
   and queries what `.local/archive/` holds (what `make demo` or the last stack left).
2. Makes the view `trail` over them: DuckDB's read_json (gzip JSON lines) with the Glue table's
   columns (Hive types mapped to DuckDB's), and dt and hour as string partitions, as in Athena.
3. Runs the query with its `?` parameters: the first archive day to read (default: the day
   before --from, since an event is archived on or after its day), then the actor for `actor`,
   then --from and --to (RFC 3339, any offset: turned into the canonical UTC form the items
   hold).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SQL_DIR = ROOT / "sql"
STACK_ENV = ROOT / ".local" / "stack.env"
ARCHIVE_DIR = ROOT / ".local" / "archive"
GLUE_TABLE = "AuditTrailTable"
OCSF_DIR = ROOT / ".local" / "ocsf"
OCSF_GLUE_TABLE = "AuditOcsfTable"
QUERIES = {  # make sql QUERY=... -> sql/<file>.sql
    "actor": "trail_by_actor",
    "actions": "actions_per_day",
    "failures": "failures_by_source_ip",
}
HIVE_TO_DUCKDB = {"string": "VARCHAR", "bigint": "BIGINT", "int": "INTEGER", "double": "DOUBLE",
                  "boolean": "BOOLEAN", "timestamp": "TIMESTAMP"}
EARLIEST, LATEST = "0001-01-01T00:00:00.000Z", "9999-12-31T23:59:59.999Z"


def query_text(name: str, source: str = "trail") -> str:
    where = SQL_DIR / "ocsf" if source == "ocsf" else SQL_DIR
    return (where / f"{QUERIES[name]}.sql").read_text(encoding="utf-8")


def glue_columns(template: Path | None = None, table: str = GLUE_TABLE) -> list[tuple[str, str]]:
    """(name, DuckDB type) of a Glue table's columns in template.yaml."""
    from local.cfn import Template, load_template
    from local.stack import DEFAULT_TEMPLATE

    tpl = Template(load_template(template or DEFAULT_TEMPLATE))
    columns = tpl.properties(table)["TableInput"]["StorageDescriptor"]["Columns"]
    return [(c["Name"], duckdb_type(c["Type"])) for c in columns]


def duckdb_type(hive: str) -> str:
    """A Hive type (``struct<a:string,b:array<bigint>>``) as DuckDB's (``STRUCT("a" VARCHAR, "b" BIGINT[])``)."""
    def parse(text: str, at: int) -> tuple[str, int]:
        for opener, make in (("struct<", "struct"), ("array<", "array")):
            if text.startswith(opener, at):
                at += len(opener)
                if make == "array":
                    inner, at = parse(text, at)
                    return f"{inner}[]", at + 1  # past '>'
                fields = []
                while text[at] != ">":
                    name_end = text.index(":", at)
                    name = text[at:name_end]
                    inner, at = parse(text, name_end + 1)
                    fields.append(f'"{name}" {inner}')
                    if text[at] == ",":
                        at += 1
                return f"STRUCT({', '.join(fields)})", at + 1
        end = at
        while end < len(text) and text[end] not in ",>":
            end += 1
        return HIVE_TO_DUCKDB[text[at:end]], end

    duck, end = parse(hive, 0)
    if end != len(hive):
        raise ValueError(f"{hive!r}: not a Hive type this reads")
    return duck


def named_fields(sql: str) -> list[tuple[str, ...]]:
    """The column and field paths a query names (comments and string literals left out):
    ``actor."user".name`` as (actor, user, name), ``status_id`` as (status_id,),
    ``element_at(resources, 1).uid`` as (element_at,), (resources,) and (uid,): all of
    ``resources``. Words that are no column (keywords, functions, aliases) match no leaf."""
    import re

    code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    code = re.sub(r"'[^']*'", "''", code)  # string literals name nothing
    chain = r'(?:"?[A-Za-z_]+"?)(?:\[\d+\])?(?:\.(?:"?[A-Za-z_]+"?)(?:\[\d+\])?)*'
    return [tuple(re.sub(r'\[\d+\]', "", part).strip('"') for part in match.split("."))
            for match in re.findall(chain, code)]


def canonical(text: str) -> str:
    """RFC 3339 with an offset -> the items' canonical UTC form (milliseconds, truncated)."""
    t = datetime.fromisoformat(text.replace("z", "Z"))
    if t.tzinfo is None:
        raise ValueError(f"{text!r}: a time needs an offset (Z or +hh:mm)")
    t = t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def stack_env(path: Path = STACK_ENV) -> dict[str, str]:
    env = {}
    if path.exists():
        import shlex

        for line in path.read_text().splitlines():
            if "=" in line and not line.lstrip().startswith("#"):
                k, v = line.split("=", 1)
                env[k.strip()] = (shlex.split(v) or [""])[0]
    for k in ("AWS_ENDPOINT_URL", "ARCHIVE_BUCKET", "OCSF_BUCKET"):
        env.setdefault(k, os.environ.get(k, ""))
    return env


def pull(archive_dir: Path, endpoint: str, bucket: str, prefix: str = "trail/",
         stored: str = "dt=*/hour=*/*") -> tuple[int, int]:
    """Makes archive_dir's ``prefix`` a copy of the bucket's: fetches the objects it lacks, removes
    those the bucket does not hold (an earlier local stack's; ``stored``: their glob under the
    prefix); returns (fetched, total)."""
    from local.stack import _client

    s3 = _client("s3", endpoint)
    fetched = total = 0
    keys = set()
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            total += 1
            keys.add(obj["Key"])
            dest = archive_dir / obj["Key"]
            if dest.exists() and dest.stat().st_size == obj["Size"]:
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_suffix(dest.suffix + ".part")
            s3.download_file(bucket, obj["Key"], str(tmp))
            tmp.replace(dest)
            fetched += 1
    for stale in (archive_dir / prefix).glob(stored):
        if stale.relative_to(archive_dir).as_posix() not in keys:
            stale.unlink()
    return fetched, total


def connect(archive_dir: Path, template: Path | None = None):
    """DuckDB with the view `trail` over archive_dir's trail/ objects."""
    import duckdb

    con = duckdb.connect()
    columns = glue_columns(template)
    files = sorted((archive_dir / "trail").glob("dt=*/hour=*/*.gz"))
    if not files:
        cols = ", ".join(f'"{n}" {t}' for n, t in columns)
        con.execute(f"CREATE TABLE trail ({cols}, dt VARCHAR, hour VARCHAR)")
        return con
    spec = "{" + ", ".join(f"'{n}': '{t}'" for n, t in columns) + "}"
    pattern = str(archive_dir / "trail" / "dt=*" / "hour=*" / "*.gz").replace("'", "''")
    con.execute(f"""CREATE VIEW trail AS SELECT * FROM read_json('{pattern}', format = 'newline_delimited',
                    compression = 'gzip', columns = {spec}, hive_partitioning = true,
                    hive_types_autocast = false)""")
    return con


def pull_ocsf(ocsf_dir: Path, endpoint: str, bucket: str) -> tuple[int, int]:
    """As ``pull``, for the OCSF copy's ext/ objects."""
    return pull(ocsf_dir, endpoint, bucket, "ext/", "*/region=*/accountId=*/eventDay=*/*")


def ocsf_files(ocsf_dir: Path) -> list[Path]:
    return sorted((ocsf_dir / "ext").glob("*/region=*/accountId=*/eventDay=*/*.parquet"))


def connect_ocsf(ocsf_dir: Path, template: Path | None = None):
    """DuckDB with the view `ocsf` over ocsf_dir's ext/ objects, and Athena's json_extract_scalar
    and element_at."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE MACRO json_extract_scalar(j, p) AS json_extract_string(j, p)")
    # Athena's element_at(array, n): NULL past the end where array[n] fails (DuckDB's own is for maps).
    con.execute("CREATE MACRO element_at(l, i) AS l[i]")
    if not ocsf_files(ocsf_dir):
        cols = ", ".join(f'"{n}" {t}' for n, t in glue_columns(template, OCSF_GLUE_TABLE))
        con.execute(f'CREATE TABLE ocsf ({cols}, region VARCHAR, "accountId" VARCHAR, "eventDay" VARCHAR)')
        return con
    pattern = str(ocsf_dir / "ext" / "*" / "region=*" / "accountId=*" / "eventDay=*" / "*.parquet").replace("'", "''")
    con.execute(f"""CREATE VIEW ocsf AS SELECT * FROM read_parquet('{pattern}', hive_partitioning = true,
                    hive_types_autocast = false)""")
    return con


def bytes_scanned(name: str, source: str, directory: Path) -> tuple[int, int]:
    """(bytes, objects) Athena would scan for the query over every object of ``directory``: the
    whole gzip JSON-lines objects, or the compressed chunks of the Parquet fields it names."""
    import duckdb

    if source == "trail":
        files = sorted((directory / "trail").glob("dt=*/hour=*/*.gz"))
        return sum(f.stat().st_size for f in files), len(files)
    files = ocsf_files(directory)
    if not files:
        return 0, 0
    # Identifiers are case-insensitive in Athena. A field reached through element_at(resources, 1)
    # names the whole list (Athena reads all of it).
    named = [tuple(p.lower() for p in n) for n in named_fields(query_text(name, source))]
    listed = ", ".join("'" + str(f).replace("'", "''") + "'" for f in files)
    chunks = duckdb.connect().execute(
        f"SELECT path_in_schema, total_compressed_size FROM parquet_metadata([{listed}])").fetchall()

    def read(path: str) -> bool:
        # A leaf's path without the LIST levels: resources, list, element, uid -> (resources, uid).
        leaf = tuple(p.lower() for p in path.split(", ") if p not in ("list", "element"))
        return any(leaf[:len(n)] == n for n in named)

    total = sum(size for path, size in chunks if read(path))
    return int(total or 0), len(files)


def parameters(name: str, actor: str | None, start: str, end: str, first_day: str | None) -> list:
    if first_day is None:
        day = datetime.fromisoformat(start[:10]) if start != EARLIEST else None
        first_day = (day - timedelta(days=1)).strftime("%Y-%m-%d") if day and day.year > 1 else "0000-00-00"
    params: list = [first_day]
    if name == "actor":
        if not actor:
            raise ValueError("the actor query needs --actor (make sql QUERY=actor ACTOR=...)")
        params.append(actor)
    return params + [start, end]


def run(name: str, con, params: list, source: str = "trail") -> tuple[list[str], list[tuple]]:
    cur = con.execute(query_text(name, source), params)
    return [d[0] for d in cur.description], cur.fetchall()


def print_table(header: list[str], rows: list[tuple], out=None, width: int = 60) -> None:
    out = out or sys.stdout
    cell = lambda v: "" if v is None else (str(v) if len(str(v)) <= width else str(v)[: width - 1] + "…")  # noqa: E731
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]
    out.write("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip() + "\n")
    out.write("  ".join("-" * w for w in widths) + "\n")
    for r in cells:
        out.write("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() + "\n")
    out.write(f"({len(rows)} row{'s' if len(rows) != 1 else ''})\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("query", choices=sorted(QUERIES), help="actor: one actor's events; actions: events per "
                    "action per day; failures: failures by source IP")
    ap.add_argument("--actor")
    ap.add_argument("--from", dest="start", default=EARLIEST, help="RFC 3339 with offset (default: the beginning)")
    ap.add_argument("--to", dest="end", default=LATEST, help="RFC 3339 with offset (default: the end)")
    ap.add_argument("--first-day", help="first archive day (dt) to read, YYYY-MM-DD (default: the day before --from)")
    ap.add_argument("--archive-dir", default=str(ARCHIVE_DIR))
    ap.add_argument("--no-pull", action="store_true", help="query what the archive directory holds")
    ap.add_argument("--format", choices=["table", "csv"], default="table")
    ap.add_argument("--source", choices=["trail", "ocsf"], default="trail",
                    help="trail: the gzip JSON-lines archive; ocsf: the OCSF Parquet copy (docs/ocsf.md)")
    ap.add_argument("--ocsf-dir", default=str(OCSF_DIR))
    ap.add_argument("--bytes", action="store_true", help="print on stderr the bytes Athena would scan")
    args = ap.parse_args(argv)
    archive_dir = Path(args.archive_dir if args.source == "trail" else args.ocsf_dir)
    try:
        start = canonical(args.start) if args.start != EARLIEST else EARLIEST
        end = canonical(args.end) if args.end != LATEST else LATEST
        params = parameters(args.query, args.actor, start, end, args.first_day)
    except ValueError as e:
        print(f"sql: {e}", file=sys.stderr)
        return 2
    if not args.no_pull:
        env = stack_env()
        variable, prefix = ("ARCHIVE_BUCKET", "trail/") if args.source == "trail" else ("OCSF_BUCKET", "ext/")
        if env.get("AWS_ENDPOINT_URL") and env.get(variable):
            try:
                fetched, total = (pull if args.source == "trail" else pull_ocsf)(
                    archive_dir, env["AWS_ENDPOINT_URL"], env[variable])
                print(f"-- pulled {fetched} new of {total} {prefix} objects from s3://{env[variable]} "
                      f"into {os.path.relpath(archive_dir, Path.cwd())}/", file=sys.stderr)
            except Exception as e:  # noqa: BLE001 - the stack may have stopped
                print(f"-- no local stack answers at {env['AWS_ENDPOINT_URL']} ({type(e).__name__}): querying "
                      f"what {os.path.relpath(archive_dir, Path.cwd())}/ holds", file=sys.stderr)
        else:
            print(f"-- no local stack (.local/stack.env; start one with `make local-up`): querying what "
                  f"{os.path.relpath(archive_dir, Path.cwd())}/ holds", file=sys.stderr)
    folder = "sql/ocsf" if args.source == "ocsf" else "sql"
    print(f"-- {folder}/{QUERIES[args.query]}.sql with parameters {params}", file=sys.stderr)
    con = connect(archive_dir) if args.source == "trail" else connect_ocsf(archive_dir)
    header, rows = run(args.query, con, params, args.source)
    if args.bytes:
        scanned, objects = bytes_scanned(args.query, args.source, archive_dir)
        print(f"-- scanned {scanned} bytes of {objects} objects", file=sys.stderr)
    if args.format == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(header)
        w.writerows(rows)
    else:
        print_table(header, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
