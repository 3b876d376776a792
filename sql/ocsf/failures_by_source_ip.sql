-- Failed events by source IP in a time range, most first: sql/failures_by_source_ip.sql over the
-- OCSF Parquet copy (docs/ocsf.md "Queries"), the same columns and rows.
-- Parameters, in order: the first day to read (YYYY-MM-DD), and the range's two ends (auditTime,
-- canonical UTC, both included).
SELECT json_extract_scalar(src_endpoint, '$.ip') AS sourceIp, count(*) AS failures,
       count(DISTINCT coalesce(json_extract_scalar(actor, '$.user.uid'), json_extract_scalar(actor, '$.user.name'))) AS actors,
       min(json_extract_scalar(metadata, '$.original_time')) AS first_failure,
       max(json_extract_scalar(metadata, '$.original_time')) AS last_failure
FROM ocsf
WHERE eventDay >= replace(?, '-', '')
  AND status_id = 2
  AND json_extract_scalar(src_endpoint, '$.ip') IS NOT NULL
  AND json_extract_scalar(metadata, '$.original_time') BETWEEN ? AND ?
GROUP BY 1
ORDER BY failures DESC, sourceIp
