"""One module per console area, each with its own `router` (see router/gateway/console/)."""
