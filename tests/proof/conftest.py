from tests.fake_provider import provider

__all__ = ["provider"]
