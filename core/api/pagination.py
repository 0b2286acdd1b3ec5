"""DRF page-number pagination with a client-chosen page size (up to 1,000)."""

from rest_framework.pagination import PageNumberPagination


class AtlasPagination(PageNumberPagination):
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000
