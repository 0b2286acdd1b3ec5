from rest_framework.routers import SimpleRouter

from .views import WorkloadViewSet

router = SimpleRouter()
router.register("workloads", WorkloadViewSet, basename="workload")

urlpatterns = router.urls
