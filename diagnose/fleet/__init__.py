"""Fleet view: many jobs' reports loaded into tables, failure statistics, suspect nodes and exports.

    load(paths) → one row per report → prepare(df) → summarize(df) → tables
    tables → to_json / export (CSV, Parquet) / prometheus / render (terminal)
"""
from diagnose.fleet.export import export, prometheus, to_json, write_prometheus
from diagnose.fleet.load import FleetInputError, load
from diagnose.fleet.render import render
from diagnose.fleet.suspects import suspect_nodes
from diagnose.fleet.tables import TABLES, hostlist_count, parse_elapsed, prepare, summarize

__all__ = ["load", "FleetInputError", "prepare", "summarize", "suspect_nodes", "to_json", "export", "prometheus", "write_prometheus", "render",
           "parse_elapsed", "hostlist_count", "TABLES"]
