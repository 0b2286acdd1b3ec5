"""DRF page-number pagination with a client-chosen page size (up to 1,000); its pages are
deferred joins from the nearer end (core/paginator.py), as every list's are."""

from __future__ import annotations

from rest_framework.pagination import PageNumberPagination

from core.paginator import DeferredJoinPaginator


class AtlasPagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
    django_paginator_class = DeferredJoinPaginator


DeferredJoinPagination = AtlasPagination  # the nodes list's name, from before every list had it
