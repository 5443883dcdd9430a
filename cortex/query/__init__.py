"""The query layer: the language, the where syntax, the router, the planner, context, search."""
