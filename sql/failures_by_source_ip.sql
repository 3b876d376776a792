-- Failed events by source IP in a time range: where failures come from, most first.
-- Parameters, in order: the first archive day to read (YYYY-MM-DD), and the range's two ends
-- (auditTime, canonical UTC, both included).
SELECT sourceIp, count(*) AS failures, count(DISTINCT actor) AS actors,
       min(auditTime) AS first_failure, max(auditTime) AS last_failure
FROM trail
WHERE dt >= ?
  AND outcome = 'failure'
  AND sourceIp IS NOT NULL
  AND auditTime BETWEEN ? AND ?
GROUP BY sourceIp
ORDER BY failures DESC, sourceIp
