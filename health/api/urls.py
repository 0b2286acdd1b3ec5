from django.urls import path
from rest_framework.routers import SimpleRouter

from .views import GpuHistoryView, HealthEventViewSet

router = SimpleRouter()
router.register("health-events", HealthEventViewSet, basename="health-event")

urlpatterns = [
    path("gpus/<int:pk>/history/", GpuHistoryView.as_view(), name="gpu-history"),
    *router.urls,
]
