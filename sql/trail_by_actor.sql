-- One actor's events in a time range, in time order.
-- Parameters, in order: the first archive day to read (YYYY-MM-DD), the actor, and the range's
-- two ends (auditTime, canonical UTC, both included).
SELECT auditTime, action, resource, outcome, sourceIp, messageId, auditText
FROM trail
WHERE dt >= ?
  AND actor = ?
  AND auditTime BETWEEN ? AND ?
ORDER BY auditTime, messageId
