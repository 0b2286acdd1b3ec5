"""Enrollment's API shapes: an agent's identity in, agent token out; staff's token lists.

An enrollment token's key appears in one answer only, the one that created it."""

from __future__ import annotations

from rest_framework import serializers

from ..models import Enrollment, EnrollmentToken
from ..services.enrollment import enrollment_token_state, parse_duration


class EnrollRequestSerializer(serializers.Serializer):
    """What an agent says it is: at least its hostname; the node names when it knows them."""

    hostname = serializers.CharField(max_length=253)
    system_uuid = serializers.CharField(max_length=64, required=False, allow_blank=True)
    machine_id = serializers.CharField(max_length=64, required=False, allow_blank=True)
    kubernetes_node_name = serializers.CharField(max_length=253, required=False, allow_blank=True)
    slurm_node_name = serializers.CharField(max_length=253, required=False, allow_blank=True)


class EnrolledSerializer(serializers.Serializer):
    token = serializers.CharField(help_text="the agent token, shown once")
    server = serializers.IntegerField()


class EnrollmentSerializer(serializers.ModelSerializer):
    """One use: who enrolled, as which server, when."""

    class Meta:
        model = Enrollment
        fields = [
            "id",
            "hostname",
            "server",
            "identity",
            "kubernetes_node_name",
            "slurm_node_name",
            "remote_addr",
            "replaced_token",
            "enrolled_at",
        ]


class EnrollmentTokenSerializer(serializers.ModelSerializer):
    """A token as listed: its uses, expiry and state, never its key."""

    created_by: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="username", read_only=True
    )
    state = serializers.SerializerMethodField()
    enrollments = EnrollmentSerializer(many=True, read_only=True)

    class Meta:
        model = EnrollmentToken
        fields = [
            "id",
            "name",
            "prefix",
            "created_by",
            "created_at",
            "expires_at",
            "uses_allowed",
            "uses",
            "revoked_at",
            "allow_reenroll",
            "state",
            "enrollments",
        ]
        read_only_fields = fields

    def get_state(self, token: EnrollmentToken) -> str:
        return enrollment_token_state(token)


class EnrollmentTokenCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
    uses = serializers.IntegerField(min_value=1, max_value=1_000_000, default=1)
    expires = serializers.CharField(
        required=False,
        allow_null=True,
        default="7d",
        help_text="30m, 12h, 7d, 2w; null: never",
    )
    allow_reenroll = serializers.BooleanField(default=False)

    def validate_expires(self, value: str | None):
        if value is None:
            return None
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class EnrollmentTokenCreatedSerializer(EnrollmentTokenSerializer):
    key = serializers.CharField(help_text="the enrollment token, shown once")

    class Meta(EnrollmentTokenSerializer.Meta):
        fields = [*EnrollmentTokenSerializer.Meta.fields, "key"]
        read_only_fields = fields
