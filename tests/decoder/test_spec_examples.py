"""The worked examples of spec §6 (../shared/spec/consumer-offsets-format.md), byte for byte.

Each example: decode the hex -> expected fields; Kafka-tool JSON equal to the spec's strings;
encode back to the very same hex. Plus the decoder's rules for versions/types it does not know.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from offsetwatch.decoder import Codec, DecodeError, KafkaJson
from offsetwatch.decoder.consumer_protocol import (
    ConsumerProtocol,
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartitionList,
)
from offsetwatch.decoder.layout import ZERO_UUID, Tags, field_layouts
from offsetwatch.decoder.records import (
    ClassicMemberMetadata,
    ClassicProtocol,
    ConsumerGroupCurrentMemberAssignmentValue,
    ConsumerGroupMemberMetadataValue,
    ConsumerGroupMetadataValue,
    GroupKey,
    GroupMemberKey,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    Record,
    TopicPartitions,
    UnknownRecord,
)

T = 1_700_000_000_000
UUID_0102 = "AQIDBAUGBwgJCgsMDQ4PEA"
UUID_0102_HEX = "0102030405060708090a0b0c0d0e0f10"


def make(cls: type, **fields: Any) -> Any:
    """A struct with the given fields; the others hold their wire default (absent-field value)."""
    for f in field_layouts(cls):
        fields.setdefault(f.name, f.wire.default)
    return cls(**fields)


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("|", ""))


def decode(key: str, value: str | None) -> Record:
    record = Codec().decode(h(key), None if value is None else h(value))
    assert isinstance(record, Record)
    return record


def assert_reencodes(record: Record, key: str, value: str | None) -> None:
    assert Codec().encode(record) == (h(key), None if value is None else h(value))


def dump_log_line(record: Record) -> str:
    """`key: ... payload: ...` as the spec quotes kafka-dump-log's line."""
    out = KafkaJson().dump_log(record)
    payload = out["payload"] if isinstance(out["payload"], str) else compact(out["payload"])
    return f"key: {compact(out['key'])} payload: {payload}"


def compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def console_line(record: Record) -> str:
    return compact(KafkaJson().console(record))


# -- 6.1 / 6.2 / 6.3: offset commits ----------------------------------------------------------

KEY_61 = "00010002673100017400000000"
KEY_61_JSON = '{"type":1,"data":{"group":"g1","topic":"t","partition":0}}'
KEY_61_DUMP = '{"type":"1","data":{"group":"g1","topic":"t","partition":0}}'


def test_6_1_offset_commit_key() -> None:
    key_bytes = h(KEY_61)
    assert len(key_bytes) == 13
    record = decode(KEY_61, None)
    assert record.key_type == 1
    assert record.key == OffsetCommitKey("g1", "t", 0)
    assert record.is_tombstone
    assert_reencodes(record, KEY_61, None)
    assert dump_log_line(record) == f"key: {KEY_61_DUMP} payload: <DELETE>"
    assert console_line(record) == f'{{"key":{KEY_61_JSON},"value":null}}'


def test_6_2_offset_commit_value_v1() -> None:
    value = "0001000000000000006400000000018bcfe568000000018bf3f1ec00"
    assert len(h(value)) == 28
    record = decode(KEY_61, value)
    assert record.value_version == 1
    assert record.value == make(
        OffsetCommitValue,
        offset=100,
        metadata="",
        commit_timestamp=T,
        expire_timestamp=1_700_604_800_000,
    )
    assert record.value.leader_epoch == -1
    assert_reencodes(record, KEY_61, value)
    assert console_line(record) == (
        '{"key":{"type":1,"data":{"group":"g1","topic":"t","partition":0}},"value":{"version":1,'
        '"data":{"offset":100,"metadata":"","commitTimestamp":1700000000000,'
        '"expireTimestamp":1700604800000}}}'
    )
    assert dump_log_line(record) == (
        'key: {"type":"1","data":{"group":"g1","topic":"t","partition":0}} payload: '
        '{"version":"1","data":{"offset":100,"metadata":"","commitTimestamp":1700000000000,'
        '"expireTimestamp":1700604800000}}'
    )


def test_6_3_offset_commit_value_v3() -> None:
    value = "000300000000000000640000000500000000018bcfe56800"
    assert len(h(value)) == 24
    record = decode(KEY_61, value)
    assert record.value_version == 3
    assert record.value == make(
        OffsetCommitValue, offset=100, leader_epoch=5, metadata="", commit_timestamp=T
    )
    assert_reencodes(record, KEY_61, value)
    assert console_line(record) == (
        '{"key":{"type":1,"data":{"group":"g1","topic":"t","partition":0}},"value":{"version":3,'
        '"data":{"offset":100,"leaderEpoch":5,"metadata":"","commitTimestamp":1700000000000}}}'
    )
    assert dump_log_line(record) == (
        f'key: {KEY_61_DUMP} payload: {{"version":"3","data":{{"offset":100,"leaderEpoch":5,'
        '"metadata":"","commitTimestamp":1700000000000}}'
    )


def test_6_3_offset_commit_value_v3_with_metadata() -> None:
    value = "0003 0000000000000064 00000005 0004 6d657461 0000018bcfe56800"
    assert len(h(value)) == 28
    record = decode(KEY_61, value)
    assert isinstance(record.value, OffsetCommitValue)
    assert record.value.metadata == "meta"
    assert_reencodes(record, KEY_61, value)


@pytest.mark.parametrize(("key_type", "version"), [(0, 0), (1, 0), (1, 2)])
def test_6_3_offset_commit_value_v0_and_v2(key_type: int, version: int) -> None:
    key = f"{key_type:04x}" + KEY_61[4:]
    value = f"{version:04x} 0000000000000064 0000 0000018bcfe56800"
    record = decode(key, value)
    assert record.key_type == key_type
    assert record.value_version == version
    assert record.value == make(OffsetCommitValue, offset=100, metadata="", commit_timestamp=T)
    assert_reencodes(record, key, value)
    data = '{"offset":100,"metadata":"","commitTimestamp":1700000000000}'
    key_json = KEY_61_JSON.replace('"type":1', f'"type":{key_type}')
    assert (
        console_line(record)
        == f'{{"key":{key_json},"value":{{"version":{version},"data":{data}}}}}'
    )
    key_dump = KEY_61_DUMP.replace('"type":"1"', f'"type":"{key_type}"')
    assert dump_log_line(record) == (
        f'key: {key_dump} payload: {{"version":"{version}","data":{data}}}'
    )


V4 = "0004 0000000000000064 00000005 01 0000018bcfe56800"
V4_DATA = '"offset":100,"leaderEpoch":5,"metadata":"","commitTimestamp":1700000000000'


def test_6_3_offset_commit_value_v4_without_topic_id() -> None:
    value = V4 + " 00"
    assert len(h(value)) == 24
    record = decode(KEY_61, value)
    assert record.value_version == 4
    assert record.value == make(
        OffsetCommitValue, offset=100, leader_epoch=5, metadata="", commit_timestamp=T
    )
    assert record.value.topic_id == ZERO_UUID
    assert not record.newer_than_known
    assert_reencodes(record, KEY_61, value)
    assert console_line(record) == (
        f'{{"key":{KEY_61_JSON},"value":{{"version":4,"data":{{{V4_DATA}}}}}}}'
    )
    assert dump_log_line(record) == (
        f'key: {KEY_61_DUMP} payload: {{"version":"4","data":{{{V4_DATA}}}}}'
    )


def test_6_3_offset_commit_value_v4_with_topic_id() -> None:
    value = V4 + " 01 00 10 " + UUID_0102_HEX
    assert len(h(value)) == 42
    record = decode(KEY_61, value)
    assert isinstance(record.value, OffsetCommitValue)
    assert record.value.topic_id == UUID_0102
    assert record.value.tags == Tags(present=(0,))
    assert_reencodes(record, KEY_61, value)
    data = f'{V4_DATA},"topicId":"{UUID_0102}"'
    assert (
        console_line(record) == f'{{"key":{KEY_61_JSON},"value":{{"version":4,"data":{{{data}}}}}}}'
    )
    assert (
        dump_log_line(record) == f'key: {KEY_61_DUMP} payload: {{"version":"4","data":{{{data}}}}}'
    )
    # a record built by hand (no tag bookkeeping) writes the tag because it is not the default
    built = Record(
        1,
        OffsetCommitKey("g1", "t", 0),
        4,
        make(
            OffsetCommitValue,
            offset=100,
            leader_epoch=5,
            metadata="",
            commit_timestamp=T,
            topic_id=UUID_0102,
        ),
    )
    assert_reencodes(built, KEY_61, value)


def test_4_1_real_kafka_4_1_offset_commit_v4() -> None:
    """The 4.1.0 bytes quoted in spec §4.1 (franz-go #1105)."""
    value = "0004 000000000021d4a8 ffffffff 01 0000019964f2d836 00"
    record = decode(KEY_61, value)
    assert record.value == make(
        OffsetCommitValue,
        offset=2_217_128,
        leader_epoch=-1,
        metadata="",
        commit_timestamp=1_758_335_260_726,
    )
    assert_reencodes(record, KEY_61, value)


def test_offset_commit_v5_is_read_with_the_v4_layout() -> None:
    value = "0005 0000000000000064 00000005 01 0000018bcfe56800 01 00 10 " + UUID_0102_HEX
    record = decode(KEY_61, value)
    assert record.value_version == 5
    assert record.newer_than_known
    assert record.value == make(
        OffsetCommitValue,
        offset=100,
        leader_epoch=5,
        metadata="",
        commit_timestamp=T,
        topic_id=UUID_0102,
        tags=Tags(present=(0,)),
    )
    assert_reencodes(record, KEY_61, value)
    # dump-log (trunk behaviour) shows the v4 fields; the 4.0 console formatter says "unknown"
    dump = KafkaJson().dump_log(record)
    assert dump["payload"] == {
        "version": "5",
        "data": {
            "offset": 100,
            "leaderEpoch": 5,
            "metadata": "",
            "commitTimestamp": T,
            "topicId": UUID_0102,
        },
    }
    console = KafkaJson().console(record)
    assert console is not None
    assert console["value"] == {"version": 5, "data": "unknown"}


def test_unknown_tag_is_preserved_through_encode() -> None:
    # tag 0 (TopicId) then an unknown tag 7 carrying 3 bytes
    value = V4 + " 02 00 10 " + UUID_0102_HEX + " 07 03 aabbcc"
    record = decode(KEY_61, value)
    assert isinstance(record.value, OffsetCommitValue)
    assert record.value.topic_id == UUID_0102
    assert record.value.tags == Tags(present=(0,), unknown=((7, h("aabbcc")),))
    assert_reencodes(record, KEY_61, value)
    # never printed by Kafka's tools
    dump = KafkaJson().dump_log(record)
    assert isinstance(dump["payload"], dict)
    assert set(dump["payload"]["data"]) == {
        "offset",
        "leaderEpoch",
        "metadata",
        "commitTimestamp",
        "topicId",
    }


def test_unknown_tag_in_a_nested_struct_is_preserved() -> None:
    # ConsumerGroupCurrentMemberAssignment (6.7) with an unknown tag 9 on the TopicPartitions
    value = (
        "0000 00000005 00000004 00 02 "
        + UUID_0102_HEX
        + " 03 00000000 00000001 01 09 02 beef 01 00"
    )
    record = decode("0008 00026731 00026d31", value)
    assert isinstance(record.value, ConsumerGroupCurrentMemberAssignmentValue)
    (assigned,) = record.value.assigned_partitions
    assert assigned.tags == Tags(unknown=((9, h("beef")),))
    assert_reencodes(record, "0008 00026731 00026d31", value)


# -- 6.4 / 6.5: classic group metadata --------------------------------------------------------

KEY_64 = "000200026731"
SUBSCRIPTION_65 = "000300000001000174ffffffff00000000ffffffffffff"
ASSIGNMENT_65 = "0003000000010001740000000100000000ffffffff"
VALUE_65 = (
    "00030008636f6e73756d657200000001000572616e676500026d310000018bcfe57b880000000100026d31ffff"
    "00026331000a2f3132372e302e302e31000493e00000afc800000017"
    + SUBSCRIPTION_65
    + "00000015"
    + ASSIGNMENT_65
)


def test_6_4_group_metadata_key() -> None:
    assert len(h(KEY_64)) == 6
    record = decode(KEY_64, None)
    assert record.key_type == 2
    assert record.key == GroupMetadataKey("g1")
    assert_reencodes(record, KEY_64, None)
    assert console_line(record) == '{"key":{"type":2,"data":{"group":"g1"}},"value":null}'


def test_6_5_group_metadata_value_v3() -> None:
    assert len(h(VALUE_65)) == 121
    record = decode(KEY_64, VALUE_65)
    assert record.value_version == 3
    assert record.value == make(
        GroupMetadataValue,
        protocol_type="consumer",
        generation=1,
        protocol="range",
        leader="m1",
        current_state_timestamp=1_700_000_005_000,
        members=(
            make(
                MemberMetadata,
                member_id="m1",
                group_instance_id=None,
                client_id="c1",
                client_host="/127.0.0.1",
                rebalance_timeout=300_000,
                session_timeout=45_000,
                subscription=h(SUBSCRIPTION_65),
                assignment=h(ASSIGNMENT_65),
            ),
        ),
    )
    assert_reencodes(record, KEY_64, VALUE_65)
    assert base64.b64encode(h(SUBSCRIPTION_65)).decode() == "AAMAAAABAAF0/////wAAAAD///////8="
    assert base64.b64encode(h(ASSIGNMENT_65)).decode() == "AAMAAAABAAF0AAAAAQAAAAD/////"
    assert console_line(record) == (
        '{"key":{"type":2,"data":{"group":"g1"}},"value":{"version":3,"data":{"protocolType":'
        '"consumer","generation":1,"protocol":"range","leader":"m1","currentStateTimestamp":'
        '1700000005000,"members":[{"memberId":"m1","groupInstanceId":null,"clientId":"c1",'
        '"clientHost":"/127.0.0.1","rebalanceTimeout":300000,"sessionTimeout":45000,'
        '"subscription":"AAMAAAABAAF0/////wAAAAD///////8=","assignment":'
        '"AAMAAAABAAF0AAAAAQAAAAD/////"}]}}}'
    )
    assert dump_log_line(record) == (
        'key: {"type":"2","data":{"group":"g1"}} payload: {"version":"3","data":{"protocolType":'
        '"consumer","generation":1,"protocol":"range","leader":"m1","currentStateTimestamp":'
        '1700000005000,"members":[{"memberId":"m1","groupInstanceId":null,"clientId":"c1",'
        '"clientHost":"/127.0.0.1","rebalanceTimeout":300000,"sessionTimeout":45000,'
        '"subscription":{"topics":["t"],"userData":null,"ownedPartitions":[],"generationId":-1,'
        '"rackId":null},"assignment":{"assignedPartitions":[{"topic":"t","partitions":[0]}],'
        '"userData":null}}]}}'
    )


def test_6_5_consumer_protocol_blobs() -> None:
    protocol = ConsumerProtocol()
    subscription = ConsumerProtocolSubscription(
        topics=("t",), user_data=None, owned_partitions=(), generation_id=-1, rack_id=None
    )
    assignment = ConsumerProtocolAssignment(
        assigned_partitions=(TopicPartitionList("t", (0,)),), user_data=None
    )
    assert protocol.decode_subscription(h(SUBSCRIPTION_65)) == (3, subscription)
    assert protocol.decode_assignment(h(ASSIGNMENT_65)) == (3, assignment)
    assert protocol.encode(3, subscription) == h(SUBSCRIPTION_65)
    assert protocol.encode(3, assignment) == h(ASSIGNMENT_65)
    assert len(h(SUBSCRIPTION_65)) == 23
    assert len(h(ASSIGNMENT_65)) == 21


def test_group_metadata_with_undecodable_blobs_keeps_base64_in_dump_log() -> None:
    # same group, but the member's subscription is not a consumer-protocol blob
    bad = VALUE_65.replace("00000017" + SUBSCRIPTION_65, "00000001" + "ff")
    record = decode(KEY_64, bad)
    dump = KafkaJson().dump_log(record)
    assert isinstance(dump["payload"], dict)
    (member,) = dump["payload"]["data"]["members"]
    assert member["subscription"] == "/w=="
    assert member["assignment"]["assignedPartitions"] == [{"topic": "t", "partitions": [0]}]


# -- 6.6: KIP-848 member metadata -------------------------------------------------------------

KEY_66 = "00050002673100026d31"
VALUE_66_BODY = "000000000363310b2f3132372e302e302e3102027400000493e008756e69666f726d"
VALUE_66_NULL_TAG = VALUE_66_BODY + "01000100"
VALUE_66_NO_TAG = VALUE_66_BODY + "00"
MEMBER_66 = dict(
    instance_id=None,
    rack_id=None,
    client_id="c1",
    client_host="/127.0.0.1",
    subscribed_topic_names=("t",),
    subscribed_topic_regex=None,
    rebalance_timeout_ms=300_000,
    server_assignor="uniform",
)
DATA_66 = (
    '"instanceId":null,"rackId":null,"clientId":"c1","clientHost":"/127.0.0.1",'
    '"subscribedTopicNames":["t"],"subscribedTopicRegex":null,"rebalanceTimeoutMs":300000,'
    '"serverAssignor":"uniform"'
)


def test_6_6_member_metadata_key() -> None:
    assert len(h(KEY_66)) == 10
    record = decode(KEY_66, None)
    assert record.key == GroupMemberKey("g1", "m1")
    assert_reencodes(record, KEY_66, None)
    assert dump_log_line(record) == (
        'key: {"type":"5","data":{"groupId":"g1","memberId":"m1"}} payload: <DELETE>'
    )
    assert KafkaJson().console(record) is None  # the 4.0 formatters skip key types >= 3


def test_6_6_member_metadata_with_the_4_0_null_tag() -> None:
    assert len(h(VALUE_66_NULL_TAG)) == 38
    record = decode(KEY_66, VALUE_66_NULL_TAG)
    assert record.value == make(
        ConsumerGroupMemberMetadataValue,
        **MEMBER_66,
        classic_member_metadata=None,
        tags=Tags(present=(0,)),
    )
    assert_reencodes(record, KEY_66, VALUE_66_NULL_TAG)
    assert dump_log_line(record) == (
        'key: {"type":"5","data":{"groupId":"g1","memberId":"m1"}} payload: {"version":"0",'
        f'"data":{{{DATA_66},"classicMemberMetadata":null}}}}'
    )
    assert KafkaJson().console(record) is None


def test_6_6_member_metadata_without_the_tag() -> None:
    assert len(h(VALUE_66_NO_TAG)) == 35
    record = decode(KEY_66, VALUE_66_NO_TAG)
    assert record.value == make(
        ConsumerGroupMemberMetadataValue, **MEMBER_66, classic_member_metadata=None
    )
    assert_reencodes(record, KEY_66, VALUE_66_NO_TAG)
    # not printed at all (trunk formatter shape)
    assert dump_log_line(record) == (
        'key: {"type":"5","data":{"groupId":"g1","memberId":"m1"}} payload: {"version":"0",'
        f'"data":{{{DATA_66}}}}}'
    )


def test_6_6_member_metadata_with_a_classic_member() -> None:
    classic = "01 00 26 01 0000afc8 02 0672616e6765 18 " + SUBSCRIPTION_65 + " 00 00"
    value = VALUE_66_BODY + classic
    record = decode(KEY_66, value)
    expected_classic = make(
        ClassicMemberMetadata,
        session_timeout_ms=45_000,
        supported_protocols=(ClassicProtocol("range", h(SUBSCRIPTION_65)),),
    )
    assert record.value == make(
        ConsumerGroupMemberMetadataValue,
        **MEMBER_66,
        classic_member_metadata=expected_classic,
        tags=Tags(present=(0,)),
    )
    assert_reencodes(record, KEY_66, value)
    dump = KafkaJson().dump_log(record)
    assert isinstance(dump["payload"], dict)
    # other byte fields stay base64 in dump-log
    assert dump["payload"]["data"]["classicMemberMetadata"] == {
        "sessionTimeoutMs": 45000,
        "supportedProtocols": [{"name": "range", "metadata": "AAMAAAABAAF0/////wAAAAD///////8="}],
    }
    # a hand-built record (no tag bookkeeping) writes the same bytes
    built = Record(
        5,
        GroupMemberKey("g1", "m1"),
        0,
        make(
            ConsumerGroupMemberMetadataValue, **MEMBER_66, classic_member_metadata=expected_classic
        ),
    )
    assert_reencodes(built, KEY_66, value)


# -- 6.7: two more KIP-848 values ---------------------------------------------------------------

KEY_67 = "000300026731"


def test_6_7_consumer_group_metadata_with_metadata_hash() -> None:
    value = "0000 00000005 01 00 08 0123456789abcdef"
    assert len(h(value)) == 17
    record = decode(KEY_67, value)
    assert record.key == GroupKey("g1")
    assert record.value == make(
        ConsumerGroupMetadataValue,
        epoch=5,
        metadata_hash=0x0123456789ABCDEF,
        tags=Tags(present=(0,)),
    )
    assert_reencodes(record, KEY_67, value)
    dump = KafkaJson().dump_log(record)
    assert compact(dump["payload"]) == (
        '{"version":"0","data":{"epoch":5,"metadataHash":81985529216486895}}'
    )


def test_6_7_consumer_group_metadata_without_hash() -> None:
    value = "0000 00000005 00"
    record = decode(KEY_67, value)
    assert record.value == make(ConsumerGroupMetadataValue, epoch=5)
    assert_reencodes(record, KEY_67, value)
    assert compact(KafkaJson().dump_log(record)["payload"]) == '{"version":"0","data":{"epoch":5}}'


def test_6_7_current_member_assignment() -> None:
    key = "0008 00026731 00026d31"
    value = "0000 00000005 00000004 00 02 " + UUID_0102_HEX + " 03 00000000 00000001 00 01 00"
    assert len(h(value)) == 40
    record = decode(key, value)
    assert record.value == make(
        ConsumerGroupCurrentMemberAssignmentValue,
        member_epoch=5,
        previous_member_epoch=4,
        state=0,
        assigned_partitions=(make(TopicPartitions, topic_id=UUID_0102, partitions=(0, 1)),),
        partitions_pending_revocation=(),
    )
    assert_reencodes(record, key, value)
    rendered = compact(KafkaJson().dump_log(record)["payload"])
    assert (
        '"assignedPartitions":[{"topicId":"AQIDBAUGBwgJCgsMDQ4PEA","partitions":[0,1]}],'
        '"partitionsPendingRevocation":[]'
    ) in rendered


# -- versions and types the decoder does not know -----------------------------------------------


def test_unknown_key_type_is_kept_whole() -> None:
    key = h("0063 00026731")
    value = h("0000 deadbeef")
    record = Codec().decode(key, value, partition=3, offset=7, timestamp=9)
    assert isinstance(record, UnknownRecord)
    assert record.key_type == 99
    assert (record.key, record.value) == (key, value)
    assert (record.partition, record.offset, record.timestamp) == (3, 7, 9)
    assert record.type_name == "unknown"
    assert Codec().encode(record) == (key, value)
    tombstone = Codec().decode(key, None)
    assert isinstance(tombstone, UnknownRecord)
    assert tombstone.is_tombstone
    assert KafkaJson().console(record) is None
    assert KafkaJson().dump_log(record)["key"].startswith("Unknown record type 99")


def test_value_version_above_range_of_a_kip_848_type_is_rejected() -> None:
    with pytest.raises(DecodeError) as info:
        Codec().decode(h(KEY_66), h("0001" + VALUE_66_NO_TAG[4:]), partition=2, offset=11)
    error = info.value
    assert "version 1" in str(error)
    assert "type 5" in str(error)
    assert error.kind == "version"
    assert (error.partition, error.offset) == (2, 11)


@pytest.mark.parametrize("version", ["ffff", "8000"])
def test_negative_value_versions_are_rejected(version: str) -> None:
    with pytest.raises(DecodeError, match="version"):
        Codec().decode(h(KEY_61), h(version + "0000000000000064 0000 0000018bcfe56800"))
