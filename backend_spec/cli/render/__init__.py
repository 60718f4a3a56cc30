"""Every renderer of the command line: diagnostics (text/json/github/sarif), tables, diffs,
check reports and Markdown docs. Nothing here loads or checks a spec."""
