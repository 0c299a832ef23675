"""The record of an experiment: its schema (``schema``), the record in memory (``results``) and on
disk (``disk``)."""
