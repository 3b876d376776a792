-- Events per action per day (the UTC day of auditTime) in a time range.
-- Parameters, in order: the first archive day to read (YYYY-MM-DD), and the range's two ends
-- (auditTime, canonical UTC, both included).
SELECT substr(auditTime, 1, 10) AS audit_day, coalesce(action, '(no action)') AS action_name,
       count(*) AS events
FROM trail
WHERE dt >= ?
  AND auditTime BETWEEN ? AND ?
GROUP BY 1, 2
ORDER BY audit_day, events DESC, action_name
