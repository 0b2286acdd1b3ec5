from rest_framework.routers import SimpleRouter

from .views import FindingViewSet

router = SimpleRouter()
router.register("findings", FindingViewSet, basename="finding")

urlpatterns = router.urls
