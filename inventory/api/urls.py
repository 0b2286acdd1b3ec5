from django.urls import path
from rest_framework.routers import SimpleRouter

from .disk_views import DiskViewSet
from .enrollment_views import EnrollmentTokenViewSet, EnrollView
from .views import GpuViewSet, MigDeviceViewSet, ReportView, ServerViewSet

router = SimpleRouter()
router.register("servers", ServerViewSet, basename="server")
router.register("gpus", GpuViewSet, basename="gpu")
router.register("mig-devices", MigDeviceViewSet, basename="mig-device")
router.register("disks", DiskViewSet, basename="disk")
router.register("enrollment-tokens", EnrollmentTokenViewSet, basename="enrollment-token")

urlpatterns = [
    path("reports/", ReportView.as_view(), name="report-create"),
    path("agents/enroll/", EnrollView.as_view(), name="agent-enroll"),
    *router.urls,
]
