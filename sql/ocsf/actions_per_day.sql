-- Events per action per day (the UTC day of auditTime) in a time range: sql/actions_per_day.sql
-- over the OCSF Parquet copy (docs/ocsf.md "Queries"), the same columns and rows.
-- Parameters, in order: the first day to read (YYYY-MM-DD), and the range's two ends (auditTime,
-- canonical UTC, both included).
SELECT substr(metadata.original_time, 1, 10) AS audit_day,
       coalesce(metadata.event_code, '(no action)') AS action_name,
       count(*) AS events
FROM ocsf
WHERE eventDay >= replace(?, '-', '')
  AND metadata.original_time BETWEEN ? AND ?
GROUP BY 1, 2
ORDER BY audit_day, events DESC, action_name
