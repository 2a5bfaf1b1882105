"""Gateway operations (issue 9): service notifications, metrics, policy sync, audit upload."""
