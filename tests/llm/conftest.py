from llm_fakes import no_sleep, server

__all__ = ["no_sleep", "server"]
