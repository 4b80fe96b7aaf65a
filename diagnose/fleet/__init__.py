"""Fleet view: many jobs' reports loaded into tables, failure statistics, suspect nodes and exports."""
