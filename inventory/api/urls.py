from django.urls import path
from rest_framework.routers import SimpleRouter

from .disk_views import DiskViewSet
from .views import GpuViewSet, MigDeviceViewSet, ReportView, ServerViewSet

router = SimpleRouter()
router.register("servers", ServerViewSet, basename="server")
router.register("gpus", GpuViewSet, basename="gpu")
router.register("mig-devices", MigDeviceViewSet, basename="mig-device")
router.register("disks", DiskViewSet, basename="disk")

urlpatterns = [path("reports/", ReportView.as_view(), name="report-create"), *router.urls]
