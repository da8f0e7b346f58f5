-- Lifecycle of billing's resources (issue 37). A payment method is
-- detached, not erased: the charges made with it keep naming it, so the
-- row stays with `detached_at` set and its provider token blanked (no
-- charge can use it again).
ALTER TABLE payment_method ADD COLUMN detached_at TEXT;
