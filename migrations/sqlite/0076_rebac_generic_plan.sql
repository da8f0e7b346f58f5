-- sdk-rebac: a plan setting of PostgreSQL's walk function. Nothing to
-- change here: the file keeps both backends' migrations numbered alike.
SELECT 1;
