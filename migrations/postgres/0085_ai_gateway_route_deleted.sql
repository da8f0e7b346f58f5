-- sdk-ai-gateway lifecycle (issue 37): a model route is deleted by keeping
-- its row (the completion records name it) with `deleted_at` set and its
-- credential envelope erased; a deleted route is neither listed nor
-- resolved, and registering its name again brings the row back.
ALTER TABLE ai_gateway_route ADD COLUMN deleted_at TEXT;
