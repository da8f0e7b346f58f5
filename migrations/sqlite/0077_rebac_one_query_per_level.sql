-- sdk-rebac: PostgreSQL's walk function reads each level with one query.
-- Nothing to change here: the file keeps both backends' migrations
-- numbered alike.
SELECT 1;
