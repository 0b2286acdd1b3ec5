from django.urls import path

from .views import CapacityView, FailureDomainRankingView, FailureDomainView, PlacementView

urlpatterns = [
    path("placement/", PlacementView.as_view(), name="placement-find"),
    path("placement/capacity/", CapacityView.as_view(), name="placement-capacity"),
    path("failure-domains/", FailureDomainView.as_view(), name="failure-domain"),
    path(
        "failure-domains/ranking/",
        FailureDomainRankingView.as_view(),
        name="failure-domain-ranking",
    ),
]
