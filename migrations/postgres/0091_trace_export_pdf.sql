-- sdk-trace: an export may be a PDF (`format` 'pdf', the artifact at
-- `traces/<tenant>/<export_id>.pdf`, signed as the JSON form is).
ALTER TABLE trace_export DROP CONSTRAINT trace_export_format_check;
ALTER TABLE trace_export ADD CONSTRAINT trace_export_format_check CHECK (format IN ('json', 'pdf'));
