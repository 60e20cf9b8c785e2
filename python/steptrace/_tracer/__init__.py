"""The tracer's Python face: Tracer and the module functions, its scopes, the steps() loop, the facts
told at each summary (allocator, DataLoader settings), and the report at exit."""
