"""What every stage shares: the one error type users see, reading inputs, writing outputs safely, worker processes."""
