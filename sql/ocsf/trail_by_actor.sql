-- One actor's events in a time range, in time order: sql/trail_by_actor.sql over the OCSF Parquet
-- copy (docs/ocsf.md "Queries"), the same columns and rows.
-- Parameters, in order: the first day to read (YYYY-MM-DD), the actor, and the range's two ends
-- (auditTime, canonical UTC, both included).
SELECT metadata.original_time AS auditTime,
       metadata.event_code AS action,
       coalesce(element_at(resources, 1).name, element_at(resources, 1).uid,
                json_extract_scalar(unmapped, '$.resource')) AS resource,
       CASE status_id WHEN 1 THEN 'success' WHEN 2 THEN 'failure' END AS outcome,
       src_endpoint.ip AS sourceIp,
       metadata.uid AS messageId,
       message AS auditText
FROM ocsf
WHERE eventDay >= replace(?, '-', '')
  AND coalesce(actor."user".uid, actor."user".name) = ?
  AND metadata.original_time BETWEEN ? AND ?
ORDER BY auditTime, messageId
