"""SMOKER enhanced authentication (SMOKER.md "Enhanced authentication"), through the chain's
Authenticator interface of ``edge_broker.auth.chain``."""

from __future__ import annotations

import pytest
from claims_helpers import OTHER_KEY, OWNER, OWNER_KEY

from edge_broker.auth.anonymous import AnonymousAuthenticator
from edge_broker.auth.chain import AuthChain
from edge_broker.auth.method_api import (
    Accepted,
    AuthOutcome,
    AuthRequest,
    ConnectionInfo,
    Continue,
    Refused,
)
from edge_broker.auth.smoker import (
    SMOKER_METHOD,
    SmokerAuthenticator,
    SmokerChallenge,
    check_response,
    issue_challenge,
    refuse_smoker_impostor,
)
from edge_broker.identity import Identity
from edge_broker.mqtt.packets import Auth, Connect, Properties
from edge_broker.mqtt.reason_codes import ReasonCode

INFO = ConnectionInfo(listener="default", transport="tcp", remote_address=("10.0.0.7", 50000))


def connect(
    client_id: str = OWNER, method: str | None = SMOKER_METHOD, data: bytes | None = None
) -> Connect:
    return Connect(
        protocol_level=5,
        client_id=client_id,
        properties=Properties(authentication_method=method, authentication_data=data),
    )


def auth(data: bytes | None, method: str | None = SMOKER_METHOD, code: int = 0x18) -> Auth:
    return Auth(code, Properties(authentication_method=method, authentication_data=data))


async def start(c: Connect) -> AuthOutcome:
    return await SmokerAuthenticator().authenticate(AuthRequest(c, INFO, tenant="site-a"))


async def finish(c: Connect, state: object, answer: Auth) -> AuthOutcome:
    request = AuthRequest(c, INFO, tenant="site-a", auth=answer, state=state)
    return await SmokerAuthenticator().authenticate(request)


async def test_good_signature_is_accepted_with_a_smoker_identity() -> None:
    c = connect()
    first = await start(c)
    assert isinstance(first, Continue)
    nonce = first.authentication_data
    assert nonce is not None and len(nonce) == 32
    outcome = await finish(c, first.state, auth(bytes(OWNER_KEY.sign(nonce))))
    assert isinstance(outcome, Accepted)
    identity = outcome.identity
    assert identity.smoker_id == OWNER and identity.client_id == OWNER
    assert identity.method == "smoker" and identity.tenant == "site-a"
    assert identity.remote_address == ("10.0.0.7", 50000) and identity.smoker_authenticated


async def test_every_connection_gets_its_own_nonce() -> None:
    nonces = set()
    for _ in range(50):
        outcome = await start(connect())
        assert isinstance(outcome, Continue) and outcome.authentication_data is not None
        nonces.add(outcome.authentication_data)
    assert len(nonces) == 50


async def test_a_signature_for_another_connections_nonce_is_refused() -> None:
    c = connect()
    one, two = await start(c), await start(c)
    assert isinstance(one, Continue) and isinstance(two, Continue)
    assert one.authentication_data is not None
    replay = auth(bytes(OWNER_KEY.sign(one.authentication_data)))
    outcome = await finish(c, two.state, replay)
    assert isinstance(outcome, Refused) and outcome.reason_code is ReasonCode.NOT_AUTHORIZED
    assert "nonce of this connection" in outcome.reason


def challenge() -> SmokerChallenge:
    c = issue_challenge(OWNER, bytes(range(32)))
    assert isinstance(c, SmokerChallenge)
    return c


@pytest.mark.parametrize(
    ("name", "data", "fragment"),
    [
        ("wrong key", bytes(OTHER_KEY.sign(bytes(range(32)))), "does not verify"),
        ("wrong nonce", bytes(OWNER_KEY.sign(bytes(32))), "not the nonce"),
        ("detached", OWNER_KEY.sign(bytes(range(32))).signature, "got 64 bytes"),
        ("missing", None, "got none"),
        ("empty", b"", "got 0 bytes"),
        ("too long", bytes(OWNER_KEY.sign(bytes(range(32)))) + b"x", "got 97 bytes"),
        (
            "flipped signature bit",
            bytes([OWNER_KEY.sign(bytes(range(32)))[0] ^ 0x80])
            + bytes(OWNER_KEY.sign(bytes(range(32))))[1:],
            "does not verify",
        ),
    ],
)
def test_bad_responses_are_0x87(name: str, data: bytes | None, fragment: str) -> None:
    refused = check_response(challenge(), auth(data))
    assert isinstance(refused, Refused), name
    assert refused.reason_code is ReasonCode.NOT_AUTHORIZED
    assert fragment in refused.reason, (name, refused.reason)


def test_good_response_passes_check() -> None:
    assert check_response(challenge(), auth(bytes(OWNER_KEY.sign(bytes(range(32)))))) is None


@pytest.mark.parametrize("method", ["smoker", "Smoker", "SMOKER ", None, "SCRAM-SHA-1"])
def test_wrong_method_in_the_answer_is_0x8c(method: str | None) -> None:
    refused = check_response(challenge(), auth(bytes(OWNER_KEY.sign(bytes(range(32)))), method))
    assert isinstance(refused, Refused)
    assert refused.reason_code is ReasonCode.BAD_AUTHENTICATION_METHOD


def test_answer_must_be_continue_authentication() -> None:
    refused = check_response(challenge(), auth(bytes(OWNER_KEY.sign(bytes(range(32)))), code=0x19))
    assert isinstance(refused, Refused) and refused.reason_code is ReasonCode.NOT_AUTHORIZED


@pytest.mark.parametrize(
    "client_id",
    [
        "",
        "sensor-1",
        OWNER.lower(),
        OWNER[:-4],
        OWNER[:-5] + "B====",
        "A" * 52 + "====",
        OWNER + "=",
    ],
)
async def test_bad_client_id_is_0x85(client_id: str) -> None:
    outcome = await start(connect(client_id))
    assert isinstance(outcome, Refused)
    assert outcome.reason_code is ReasonCode.CLIENT_IDENTIFIER_NOT_VALID
    assert "Client Identifier" in outcome.reason


async def test_authentication_data_in_connect_is_refused() -> None:
    outcome = await start(connect(data=b"early"))
    assert isinstance(outcome, Refused) and outcome.reason_code is ReasonCode.NOT_AUTHORIZED


async def test_the_method_only_applies_to_exactly_smoker_and_the_chain_answers_0x8c() -> None:
    smoker = SmokerAuthenticator()
    assert smoker.applies(AuthRequest(connect(), INFO))
    chain = AuthChain([smoker, AnonymousAuthenticator()])
    for method in ("smoker", "SMOKER-v2"):
        chosen, outcome = await chain.authenticate(AuthRequest(connect(method=method), INFO))
        assert chosen is None and isinstance(outcome, Refused)
        assert outcome.reason_code is ReasonCode.BAD_AUTHENTICATION_METHOD
    chosen, outcome = await chain.authenticate(AuthRequest(connect(), INFO))
    assert chosen is smoker and isinstance(outcome, Continue)


async def test_no_answer_state_without_auth_packet_is_refused() -> None:
    outcome = await finish(connect(), challenge(), None)  # type: ignore[arg-type]
    assert isinstance(outcome, Refused) and outcome.reason_code is ReasonCode.NOT_AUTHORIZED


async def test_reauthentication_issues_a_fresh_nonce() -> None:
    c = connect()
    request = AuthRequest(c, INFO, auth=auth(None, code=0x19), reauthenticating=True)
    first = await SmokerAuthenticator().authenticate(request)
    assert isinstance(first, Continue) and first.authentication_data is not None
    answer = auth(bytes(OWNER_KEY.sign(first.authentication_data)))
    done = await SmokerAuthenticator().authenticate(
        AuthRequest(c, INFO, auth=answer, state=first.state, reauthenticating=True)
    )
    assert isinstance(done, Accepted) and done.identity.smoker_id == OWNER
    wrong = AuthRequest(c, INFO, auth=auth(None, "PLAIN", 0x19), reauthenticating=True)
    refused = await SmokerAuthenticator().authenticate(wrong)
    assert isinstance(refused, Refused)
    assert refused.reason_code is ReasonCode.BAD_AUTHENTICATION_METHOD


def test_non_smoker_client_with_a_smoker_id_is_refused_0x85() -> None:
    impostor = Identity(client_id=OWNER, method="password", username="mallory")
    refused = refuse_smoker_impostor(impostor)
    assert isinstance(refused, Refused)
    assert refused.reason_code is ReasonCode.CLIENT_IDENTIFIER_NOT_VALID
    assert refuse_smoker_impostor(Identity(client_id="sensor-1", method="anonymous")) is None
    assert refuse_smoker_impostor(Identity(OWNER, "smoker", smoker_id=OWNER)) is None
    # refused by its spelling alone ("decodes as a SMOKER ID"), usable key or not
    assert refuse_smoker_impostor(Identity("A" * 52 + "====", "anonymous")) is not None
    assert refuse_smoker_impostor(Identity(OWNER[:-5] + "B====", "anonymous")) is None


def test_nonce_length_is_checked() -> None:
    with pytest.raises(ValueError):
        issue_challenge(OWNER, b"short")
