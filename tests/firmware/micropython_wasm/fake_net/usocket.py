from socket import *  # noqa: F403 - umqtt.simple imports usocket
from socket import SENT, SERVER  # noqa: F401
