"""``faust.exceptions``: agentstream's exception tree under Faust's module name, with Faust's names.

Each Faust name is an agentstream class (``FaustError`` is :class:`AgentStreamError`, the root, so
``except FaustError`` catches everything agentstream raises on purpose; ``ProducerSendError`` is
:class:`ProducerError`...) or, for the warnings, a class of this module.
"""

from agentstream import exceptions as _tree
from agentstream.exceptions import *  # noqa: F403  (the re-export is the point of this module)
from agentstream.exceptions import (
    AgentStreamError,
    ConfigError,
    NotReady,
    PartitionCountMismatch,
    Predicate,
    ProducerError,
)

FaustError = AgentStreamError
FaustPredicate = Predicate
ProducerSendError = ProducerError
PartitionsMismatch = PartitionCountMismatch
SecurityError = ConfigError  # a security setting agentstream cannot use is a ConfigError naming it


class ConsumerNotStarted(NotReady):
    """The consumer was used before it started."""


class FaustWarning(UserWarning):
    """Base class of Faust's warnings (for ``warnings.filterwarnings``)."""


class AlreadyConfiguredWarning(FaustWarning):
    """Faust's warning for configuring an app after its configuration was read."""


class SecurityWarning(FaustWarning):
    """Faust's warning about insecure settings."""


__all__ = sorted(
    {
        name
        for name, value in vars(_tree).items()
        if isinstance(value, type) and issubclass(value, Exception) and value.__module__ == _tree.__name__
    }
    | {
        "FaustError",
        "FaustPredicate",
        "ProducerSendError",
        "PartitionsMismatch",
        "SecurityError",
        "ConsumerNotStarted",
        "FaustWarning",
        "AlreadyConfiguredWarning",
        "SecurityWarning",
    }
)
