-- Failed events by source IP in a time range, most first: sql/failures_by_source_ip.sql over the
-- OCSF Parquet copy (docs/ocsf.md "Queries"), the same columns and rows.
-- Parameters, in order: the first day to read (YYYY-MM-DD), and the range's two ends (auditTime,
-- canonical UTC, both included).
SELECT src_endpoint.ip AS sourceIp, count(*) AS failures,
       count(DISTINCT coalesce(actor."user".uid, actor."user".name)) AS actors,
       min(metadata.original_time) AS first_failure,
       max(metadata.original_time) AS last_failure
FROM ocsf
WHERE eventDay >= replace(?, '-', '')
  AND status_id = 2
  AND src_endpoint.ip IS NOT NULL
  AND metadata.original_time BETWEEN ? AND ?
GROUP BY 1
ORDER BY failures DESC, sourceIp
