"""The built-in middleware library."""
