"""Client for `leap serve`: evaluate kernel candidates as rewards (docs/serve.md)."""
from .client import Client, Outcome, TaskInfo, LeapServeError
from .multiturn import next_user_message, extract_candidate
from .prompt import build_prompt

__all__ = ["Client", "Outcome", "TaskInfo", "LeapServeError", "next_user_message", "extract_candidate",
           "build_prompt"]
