"""Rendering a Diagnosis: text and JSON (report), Markdown, HTML, atomic file outputs, and redaction of
secrets at the output boundary."""
